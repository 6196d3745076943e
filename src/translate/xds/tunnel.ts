// `tunnel` (backend/tunnel.ts) → Envoy's HTTP/1.1 CONNECT transport socket around a cluster's TLS socket.

import { create } from "@bufbuild/protobuf";
import { type Any, anyPack } from "@bufbuild/protobuf/wkt";
import { Http11ProxyUpstreamTransportSchema } from "../../gen/envoy/extensions/transport_sockets/http_11_proxy/v3/upstream_http_11_connect_pb.js";
import type { TunnelIR } from "../backend/tunnel.js";
import { socketAddress } from "./address.js";

export interface TransportSocketInit {
  readonly name: string;
  readonly configType: { readonly case: "typedConfig"; readonly value: Any };
}

/**
 * The TLS socket `inner` inside Envoy's http_11_proxy transport socket, which connects to the proxy and sends
 * `CONNECT <endpoint>` (the endpoint's host name when it has one, else its address) before the handshake.
 */
export function throughTunnel(inner: TransportSocketInit, tunnel: TunnelIR | undefined): TransportSocketInit {
  if (tunnel === undefined) return inner;
  const wrapped = create(Http11ProxyUpstreamTransportSchema, {
    transportSocket: inner,
    defaultProxyAddress: socketAddress(tunnel.address, tunnel.port),
  });
  return {
    name: "envoy.transport_sockets.http_11_proxy",
    configType: { case: "typedConfig", value: anyPack(Http11ProxyUpstreamTransportSchema, wrapped) },
  };
}
