// `backend.transformation` and a `retry.condition` reading more than the status code, through a real Envoy: Sluice's
// transformation ext_proc runs as an upstream filter of the backend's cluster (xds/backend-transformation.ts). A
// route split between two Services changes only the requests to the Service the policy targets; bodies are rewritten
// both ways; `source` and `jwt` are seen; a policy with an expression that does not compile is refused naming its path
// and changes nothing. The retry condition is evaluated on each
// attempt's response (headers, body, the request) and the route retries exactly those; the router's mark never
// reaches the client, and a backend cannot ask for a retry by sending the mark itself.

import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import { localService, startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { testIssuer } from "../helpers/jwt.js";
import { type EchoBody, request, startEchoUpstream, type Upstream } from "../helpers/net.js";

/** A backend answering by a script: each request's answer from the count of requests seen so far on its path. */
interface Scripted {
  readonly port: number;
  readonly seen: Map<string, number>;
  close(): Promise<void>;
}

async function startScripted(): Promise<Scripted> {
  const seen = new Map<string, number>();
  const server: Server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      const path = (req.url ?? "").split("?")[0] ?? "";
      const n = (seen.get(path) ?? 0) + 1;
      seen.set(path, n);
      const busy = n <= 2;
      if (path === "/retry/header") {
        res.writeHead(200, { "x-state": busy ? "busy" : "ok" });
        res.end(`attempt ${n}`);
      } else if (path === "/retry/body") {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ status: busy ? "retry-me" : "done", attempt: n }));
      } else if (path === "/retry/always") {
        res.writeHead(200, { "x-state": "busy" });
        res.end(`attempt ${n}`);
      } else if (path === "/retry/forged") {
        // The backend's own mark must not make the router retry.
        res.writeHead(200, { "x-state": "ok", "x-sluice-retry-condition": "true" });
        res.end(`attempt ${n}`);
      } else if (path === "/retry/request") {
        res.writeHead(503);
        res.end(`attempt ${n}`);
      } else {
        res.writeHead(404);
        res.end();
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    port: (server.address() as AddressInfo).port,
    seen,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

const ISSUER = "https://issuer.sluice.test";

function resources(echo: number, other: number, scripted: number, jwks: string): string {
  return `${localService("echo", echo)}${localService("other", other)}${localService("scripted", scripted)}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - name: split
      matches: [{ path: { type: PathPrefix, value: /split } }]
      backendRefs: [{ name: echo, port: 80 }, { name: other, port: 80 }]
    - name: retry
      matches: [{ path: { type: PathPrefix, value: /retry } }]
      backendRefs: [{ name: scripted, port: 80 }]
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: echo-transform, namespace: default }
spec:
  targetRefs: [{ group: "", kind: Service, name: echo }]
  backend:
    transformation:
      request:
        set:
          - { name: x-toward, value: "'echo ' + request.method + ' ' + request.path" }
          - { name: x-source, value: "string(source.address)" }
          - { name: x-subject, value: "jwt.sub" }
        remove: [x-secret]
        body: "size(request.body) == 0 ? '' : '{\\"wrapped\\":' + request.body + '}'"
      response:
        set: [{ name: x-answered, value: "string(response.code) + ' by ' + response.headers['x-upstream']" }]
        body: "response.body.contains('\\"upstream\\":\\"echo\\"') ? 'from echo, rewritten' : 'unexpected'"
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: bad-transform, namespace: default }
spec:
  targetRefs: [{ group: "", kind: Service, name: other }]
  backend:
    transformation:
      request:
        set: [{ name: x-bad, value: "request.headers[" }]
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: split-jwt, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: HTTPRoute, name: r, sectionName: split }]
  traffic:
    jwtAuthentication:
      mode: Optional
      providers: [{ issuer: "${ISSUER}", jwks: { inline: ${JSON.stringify(jwks)} } }]
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: retry, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: HTTPRoute, name: r, sectionName: retry }]
  traffic:
    retry:
      attempts: 3
      condition: >-
        response.headers['x-state'] == 'busy' || response.body.contains('retry-me') ||
        (response.code == 503 && request.headers['x-idempotent'] == 'yes')
`;
}

describe("backend.transformation and retry.condition through Sluice's upstream ext_proc", { timeout: 90_000 }, () => {
  let echo: Upstream;
  let other: Upstream;
  let scripted: Scripted;
  let gw: TestGateway;
  let token: string;

  before(async () => {
    echo = await startEchoUpstream("echo");
    other = await startEchoUpstream("other");
    scripted = await startScripted();
    const issuer = await testIssuer(ISSUER);
    token = await issuer.sign({ sub: "ada" });
    gw = await startTestGateway(
      () => resources(echo.port, other.port, scripted.port, issuer.jwks),
      "/split",
      (s) => s === 200,
    );
  });
  after(async () => {
    await gw?.stop();
    await echo?.close();
    await other?.close();
    await scripted?.close();
  });

  test("only the requests to the targeted Service of a split route are transformed, both ways", async () => {
    echo.requests.length = 0;
    other.requests.length = 0;
    const answers = [];
    for (let i = 0; i < 16; i++) {
      answers.push(
        await request(gw.port, `/split/${i}`, {
          method: "POST",
          headers: { "x-secret": "s3", "content-type": "application/json", authorization: `Bearer ${token}` },
          body: `{"n":${i}}`,
        }),
      );
    }
    assert.ok(echo.requests.length > 0 && other.requests.length > 0, "both backends were chosen");
    for (const seen of echo.requests) {
      assert.match(String(seen.headers["x-toward"]), /^echo POST \/split\/\d+$/);
      assert.equal(seen.headers["x-secret"], undefined);
      assert.equal(seen.headers["x-source"], "127.0.0.1");
      // The identity filters' metadata reaches the upstream filter.
      assert.equal(seen.headers["x-subject"], "ada");
      assert.match(seen.body, /^\{"wrapped":\{"n":\d+\}\}$/);
      assert.equal(seen.headers["content-length"], String(Buffer.byteLength(seen.body)));
    }
    for (const seen of other.requests) {
      assert.equal(seen.headers["x-toward"], undefined);
      assert.equal(seen.headers["x-bad"], undefined);
      assert.equal(seen.headers["x-secret"], "s3");
      assert.match(seen.body, /^\{"n":\d+\}$/);
    }
    const fromEcho = answers.filter((a) => a.headers["x-answered"] !== undefined);
    assert.equal(fromEcho.length, echo.requests.length);
    for (const a of fromEcho) {
      assert.equal(a.headers["x-answered"], "200 by echo");
      assert.equal(a.body, "from echo, rewritten");
    }
    for (const a of answers.filter((x) => x.headers["x-answered"] === undefined)) {
      assert.equal((JSON.parse(a.body) as EchoBody).upstream, "other");
    }
  });

  test("retry.condition on a response header: retried until it no longer holds", async () => {
    const r = await request(gw.port, "/retry/header");
    assert.equal(r.status, 200);
    assert.equal(r.headers["x-state"], "ok");
    assert.equal(r.body, "attempt 3");
    assert.equal(scripted.seen.get("/retry/header"), 3);
    assert.equal(r.headers["x-sluice-retry-condition"], undefined);
  });

  test("retry.condition on the response body", async () => {
    const r = await request(gw.port, "/retry/body");
    assert.equal(r.status, 200);
    assert.deepEqual(JSON.parse(r.body), { status: "done", attempt: 3 });
    assert.equal(scripted.seen.get("/retry/body"), 3);
  });

  test("attempts spent: the last response goes out as it is, without the router's mark", async () => {
    const r = await request(gw.port, "/retry/always");
    assert.equal(r.status, 200);
    assert.equal(r.headers["x-state"], "busy");
    // The first attempt and three retries.
    assert.equal(scripted.seen.get("/retry/always"), 4);
    assert.equal(r.body, "attempt 4");
    assert.equal(r.headers["x-sluice-retry-condition"], undefined);
  });

  test("a backend sending the mark itself is not retried", async () => {
    const r = await request(gw.port, "/retry/forged");
    assert.equal(r.status, 200);
    assert.equal(scripted.seen.get("/retry/forged"), 1);
    assert.equal(r.headers["x-sluice-retry-condition"], undefined);
  });

  test("retry.condition reading the request: a 503 is retried only for an idempotent request", async () => {
    const once = await request(gw.port, "/retry/request");
    assert.equal(once.status, 503);
    assert.equal(scripted.seen.get("/retry/request"), 1);
    const retried = await request(gw.port, "/retry/request", { headers: { "x-idempotent": "yes" } });
    assert.equal(retried.status, 503);
    assert.equal(scripted.seen.get("/retry/request"), 5);
  });

  test("status: a policy whose expression does not compile is refused naming its path; the others are served", async () => {
    const { resources } = (await gw.sluice.status()) as {
      resources: { kind: string; name: string; status: unknown }[];
    };
    const status = (name: string) =>
      JSON.stringify(resources.find((r) => r.kind === "GwPolicy" && r.name === name)?.status ?? {});
    assert.match(status("bad-transform"), /spec\.backend\.transformation\.request\.set\[0\]\.value: invalid CEL/);
    assert.doesNotMatch(status("echo-transform"), /Warning|not applied/);
    assert.doesNotMatch(status("retry"), /retry\.condition/);
  });
});
