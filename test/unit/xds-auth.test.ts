// Authenticated xDS and services (docs/xds-security.md), with real grpc-js clients over mutual TLS: the ADS server
// serves a stream only the snapshot of the Gateway its client certificate names, refuses a node of another Gateway
// with PERMISSION_DENIED before sending anything, and takes no client without a certificate of its CA; Sluice's own
// HTTP/2 + HTTP/1.1 server (src/grpc/unary-server.ts) takes only such clients too.

import assert from "node:assert/strict";
import { request as httpsRequest } from "node:https";
import { after, before, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { UnaryGrpcServer } from "../../src/grpc/unary-server.js";
import {
  createCa,
  type IssuedCertificate,
  issueGatewayCertificate,
  issueServerCertificate,
} from "../../src/security/certificates.js";
import type { MutualTls } from "../../src/security/tls.js";
import { XdsServer } from "../../src/xds-server/server.js";
import { buildSnapshot } from "../../src/xds-server/snapshot.js";
import { CLUSTER_TYPE } from "../../src/xds-server/type-urls.js";
import { AdsProbeClient, deltaRequest, sotwRequest } from "../support/ads-probe.js";
import { edsCluster, endpoints } from "../support/xds-fixtures.js";
import { MemoryLogger } from "../support/xds-harness.js";

const ca = await createCa();
const serving = await issueServerCertificate(ca, { dnsNames: ["localhost"], ipAddresses: ["127.0.0.1"] });
const tls: MutualTls = { cert: serving.cert, key: serving.key, ca: ca.cert };
const gatewayA = await issueGatewayCertificate(ca, "ns/a");
const foreign = await issueGatewayCertificate(await createCa({ name: "CN=Another CA" }), "ns/a");

/** Client credentials: Sluice's CA to verify the server, and a client certificate if any. */
function credentials(client: IssuedCertificate | undefined): grpc.ChannelCredentials {
  return client === undefined
    ? grpc.credentials.createSsl(Buffer.from(ca.cert))
    : grpc.credentials.createSsl(Buffer.from(ca.cert), Buffer.from(client.key), Buffer.from(client.cert));
}

describe("ADS over mutual TLS", () => {
  const logger = new MemoryLogger();
  const server = new XdsServer({ logger });
  let port = 0;
  const clients: AdsProbeClient[] = [];
  const client = (c: grpc.ChannelCredentials) => {
    const probe = new AdsProbeClient(port, c);
    clients.push(probe);
    return probe;
  };

  before(async () => {
    port = (await server.start({ host: "127.0.0.1", port: 0, tls })).port;
    for (const g of ["a", "b"]) {
      const snapshot = buildSnapshot({ clusters: [edsCluster(`${g}-only`)], endpoints: [endpoints(`${g}-only`, [1])] });
      assert.ok(server.cache.setSnapshot(`ns/${g}`, snapshot).ok);
    }
  });
  after(async () => {
    for (const c of clients) c.close();
    await server.stop();
  });

  it("serves a node of the certificate's Gateway its snapshot, and status shows the identity", async () => {
    const s = client(credentials(gatewayA)).sotw();
    s.write(sotwRequest({ typeUrl: CLUSTER_TYPE, node: { id: "envoy-a", cluster: "ns/a" } }));
    const r = await s.next(5_000);
    assert.equal(r.resources.length, 1);
    assert.match(Buffer.from(r.resources[0]?.value ?? []).toString("latin1"), /a-only/);
    const stream = server.status().streams.find((x) => x.nodeId === "envoy-a");
    assert.equal(stream?.identity, "ns/a");
    assert.equal(stream?.group, "ns/a");
    s.close();
  });

  for (const kind of ["sotw", "delta"] as const) {
    it(`refuses (${kind}) a node of another Gateway with PERMISSION_DENIED, sending nothing`, async () => {
      const refusedBefore = server.status().counters.refused;
      const c = client(credentials(gatewayA));
      let failure: { error: grpc.ServiceError; responses: readonly unknown[] };
      if (kind === "sotw") {
        const s = c.sotw();
        s.write(sotwRequest({ typeUrl: CLUSTER_TYPE, node: { id: `mallory-${kind}`, cluster: "ns/b" } }));
        failure = await s.failure();
      } else {
        const s = c.delta();
        s.write(deltaRequest({ typeUrl: CLUSTER_TYPE, node: { id: `mallory-${kind}`, cluster: "ns/b" } }));
        failure = await s.failure();
      }
      assert.equal(failure.error.code, grpc.status.PERMISSION_DENIED);
      assert.equal(
        failure.error.details,
        `the client certificate is Gateway ns/a's; node "mallory-${kind}" asks for the configuration of ns/b`,
      );
      assert.deepEqual(failure.responses, []);
      const status = server.status();
      assert.equal(status.counters.refused, refusedBefore + 1);
      assert.deepEqual(
        (({ identity, nodeId, group }) => ({ identity, nodeId, group }))(status.refusals.at(-1) ?? ({} as never)),
        { identity: "ns/a", nodeId: `mallory-${kind}`, group: "ns/b" },
      );
      assert.ok(!status.streams.some((x) => x.nodeId === `mallory-${kind}`));
      assert.ok(
        logger.entries.some(
          (e) => e.level === "warn" && e.message.includes("refused") && e.fields["node"] === `mallory-${kind}`,
        ),
      );
    });
  }

  it("takes no client without a certificate of its CA, nor a plaintext one", async () => {
    const streamsBefore = server.status().counters.streamsTotal;
    for (const c of [credentials(undefined), credentials(foreign), grpc.credentials.createInsecure()]) {
      const s = client(c).sotw();
      s.write(sotwRequest({ typeUrl: CLUSTER_TYPE, node: { id: "anon", cluster: "ns/a" } }));
      const { error, responses } = await s.failure();
      assert.equal(error.code, grpc.status.UNAVAILABLE, error.message);
      assert.deepEqual(responses, []);
    }
    // None of them reached the ADS service.
    assert.equal(server.status().counters.streamsTotal, streamsBefore);
  });
});

describe("Sluice's HTTP/2 + HTTP/1.1 server over mutual TLS", () => {
  const lines: string[] = [];
  const echo = new UnaryGrpcServer(new Map([["/test.Echo/Call", async (m: Uint8Array) => m]]), new Map(), {
    log: (l) => lines.push(l),
    http1: () => ({ status: 200, body: "checked" }),
    tls,
  });
  let port = 0;
  before(async () => {
    port = await echo.start("127.0.0.1", 0);
  });
  after(() => echo.stop());

  const identity = (b: Buffer) => b;
  const Echo = grpc.makeGenericClientConstructor(
    {
      call: {
        path: "/test.Echo/Call",
        requestStream: false,
        responseStream: false,
        requestSerialize: identity,
        requestDeserialize: identity,
        responseSerialize: identity,
        responseDeserialize: identity,
      },
    },
    "Echo",
  );
  function call(c: grpc.ChannelCredentials): Promise<string> {
    const client = new Echo(`127.0.0.1:${port}`, c) as unknown as grpc.Client & {
      call(m: Buffer, cb: (e: grpc.ServiceError | null, r?: Buffer) => void): void;
    };
    return new Promise<string>((resolve, reject) =>
      client.call(Buffer.from("ping"), (e, r) => {
        client.close();
        if (e) reject(e);
        else resolve(String(r));
      }),
    ).finally(() => client.close());
  }
  function http1(client: IssuedCertificate | undefined): Promise<string> {
    return new Promise((resolve, reject) => {
      const req = httpsRequest(
        {
          host: "127.0.0.1",
          port,
          path: "/check",
          ca: ca.cert,
          ...(client !== undefined ? { cert: client.cert, key: client.key } : {}),
          agent: false,
        },
        (res) => {
          let body = "";
          res.on("data", (d: Buffer) => (body += d.toString()));
          res.on("end", () => resolve(`${res.statusCode} ${body}`));
        },
      );
      req.on("error", reject);
      req.end();
    });
  }

  it("answers gRPC and HTTP/1.1 clients with a certificate of the CA", async () => {
    assert.equal(await call(credentials(gatewayA)), "ping");
    assert.equal(await http1(gatewayA), "200 checked");
    assert.equal(echo.refusedConnections, 0);
  });

  it("refuses clients without one in the handshake, and says so once", async () => {
    for (const c of [credentials(undefined), credentials(foreign), grpc.credentials.createInsecure()]) {
      await assert.rejects(call(c), (e: grpc.ServiceError) => e.code === grpc.status.UNAVAILABLE);
    }
    await assert.rejects(http1(undefined));
    await assert.rejects(http1(foreign));
    assert.ok(echo.refusedConnections >= 5, String(echo.refusedConnections));
    const reports = lines.filter((l) => l.includes("refused a TLS client"));
    assert.equal(reports.length, 1, lines.join("\n"));
  });
});
