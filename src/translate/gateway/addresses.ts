// The addresses a Gateway reports in status: where clients reach its Envoys.

import { GATEWAY_NAME_LABEL, type Gateway } from "../../api/gateway-api.js";
import { namespaceOf } from "../../api/resource.js";
import type { TranslationInput } from "../input.js";

export interface GatewayAddress {
  readonly type: "IPAddress" | "Hostname";
  readonly value: string;
}

const IP = /^(\d{1,3}(\.\d{1,3}){3}|[0-9a-fA-F:]*:[0-9a-fA-F:.]*)$/;

function address(value: string): GatewayAddress {
  return { type: IP.test(value) ? "IPAddress" : "Hostname", value };
}

/**
 * The Envoy Service of the Gateway (same namespace, labelled with its name): its load balancer's addresses once it
 * has them, else its cluster IP. Without such a Service (file mode, or before provisioning), the addresses the
 * Gateway asks for in spec.addresses. Empty when none is known.
 */
export function gatewayAddresses(input: TranslationInput, gw: Gateway): GatewayAddress[] {
  const ns = namespaceOf(gw);
  const service = input.services
    .filter((s) => namespaceOf(s) === ns && s.metadata.labels?.[GATEWAY_NAME_LABEL] === gw.metadata.name)
    .sort((a, b) => (a.metadata.name < b.metadata.name ? -1 : 1))[0];
  if (service !== undefined) {
    const status = (service as { status?: { loadBalancer?: { ingress?: { ip?: string; hostname?: string }[] } } })
      .status;
    const ingress = (status?.loadBalancer?.ingress ?? []).flatMap((i) =>
      i.ip !== undefined ? [address(i.ip)] : i.hostname !== undefined ? [address(i.hostname)] : [],
    );
    if (ingress.length > 0) return ingress;
    const clusterIP = service.spec.clusterIP;
    if (clusterIP !== undefined && clusterIP !== "" && clusterIP !== "None") return [address(clusterIP)];
  }
  return (gw.spec.addresses ?? [])
    .filter((a) => a.type === undefined || a.type === "IPAddress" || a.type === "Hostname")
    .map((a) => ({
      type: a.type === "Hostname" ? "Hostname" : IP.test(a.value) ? "IPAddress" : "Hostname",
      value: a.value,
    }));
}
