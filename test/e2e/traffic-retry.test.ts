// traffic.retry through Envoy: Gateway API codes and attempts, a CEL `condition` on the status code, which becomes
// Envoy's retriable status codes (src/translate/xds/retry-condition.ts), and a `precondition`, which Sluice's
// transformation ext_proc evaluates per request (x-envoy-max-retries: 0 unless true). The backend answers a request's
// first attempts with the status the request asks for (`x-fail: <status>,<times>`), then 200, and counts attempts
// per request id.

import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import { localService, rulePolicy, startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { request } from "../helpers/net.js";

const RULES = ["codes", "cond", "headers", "pre", "none"];
const attempts = new Map<string, number>();

const backend = createServer((req, res) => {
  const id = String(req.headers["x-id"] ?? "");
  const n = (attempts.get(id) ?? 0) + 1;
  attempts.set(id, n);
  const [status, times] = String(req.headers["x-fail"] ?? "").split(",");
  if (status !== undefined && status !== "" && n <= Number(times ?? "1")) {
    res.writeHead(Number(status), { "retry-after": "0" }).end(`failed attempt ${n}`);
    return;
  }
  res.end(`ok after ${n}`);
});

let next = 0;
/** A request to `rule` whose first `times` attempts get `status`; returns the answer and the attempts made. */
async function tryRule(gw: TestGateway, rule: string, status: number, times = 1, method = "GET") {
  const id = `${rule}-${next++}`;
  const r = await request(gw.port, `/${rule}`, { method, headers: { "x-id": id, "x-fail": `${status},${times}` } });
  return { status: r.status, body: r.body, attempts: attempts.get(id) ?? 0 };
}

describe("traffic.retry through Envoy", { timeout: 60_000 }, () => {
  let gw: TestGateway;

  before(async () => {
    await new Promise<void>((r) => backend.listen(0, "127.0.0.1", r));
    const port = (backend.address() as AddressInfo).port;
    gw = await startTestGateway(
      () => `${localService("app", port)}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
${RULES.map(
  (n) => `    - name: ${n}
      matches: [{ path: { type: PathPrefix, value: /${n} } }]
      backendRefs: [{ name: app, port: 80 }]`,
).join("\n")}
${rulePolicy("codes", "retry: { codes: [502], attempts: 2 }")}${rulePolicy(
  "cond",
  `retry: { attempts: 2, codes: [429], condition: "response.code >= 502 && response.code <= 504" }`,
)}${rulePolicy("headers", `retry: { attempts: 2, condition: "response.headers['retry-after'] == '0'" }`)}${rulePolicy(
  "pre",
  `retry: { attempts: 2, codes: [503], precondition: "request.method == 'GET' || 'x-retry' in request.headers" }`,
)}`,
      "/none",
      (s) => s === 200,
    );
  });
  after(async () => {
    await gw?.stop();
    backend.close();
  });

  test("codes: a 502 is retried and the client gets the second attempt's 200", async () => {
    const r = await tryRule(gw, "codes", 502);
    assert.deepEqual(r, { status: 200, body: "ok after 2", attempts: 2 });
    // 503 is not among the codes: not retried.
    assert.deepEqual(await tryRule(gw, "codes", 503), { status: 503, body: "failed attempt 1", attempts: 1 });
  });

  test("condition: the codes it is true for are retried (with the listed ones), up to the attempts", async () => {
    for (const status of [502, 503, 504, 429]) {
      const r = await tryRule(gw, "cond", status);
      assert.deepEqual(r, { status: 200, body: "ok after 2", attempts: 2 }, String(status));
    }
    // False for 500 and 505: answered as they are.
    for (const status of [500, 505]) {
      assert.deepEqual(await tryRule(gw, "cond", status), { status, body: "failed attempt 1", attempts: 1 });
    }
    // Failing every attempt: one try and two retries, then the last answer.
    assert.deepEqual(await tryRule(gw, "cond", 503, 10), { status: 503, body: "failed attempt 3", attempts: 3 });
  });

  test("precondition: evaluated per request by Sluice; when not true the request gets no retry", async () => {
    assert.deepEqual(await tryRule(gw, "pre", 503), { status: 200, body: "ok after 2", attempts: 2 });
    assert.deepEqual(await tryRule(gw, "pre", 503, 1, "POST"), { status: 503, body: "failed attempt 1", attempts: 1 });
    // Its other branch: a header the client sends.
    const id = `pre-${next++}`;
    const r = await request(gw.port, "/pre", {
      method: "POST",
      headers: { "x-id": id, "x-fail": "503,1", "x-retry": "yes" },
    });
    assert.deepEqual({ status: r.status, attempts: attempts.get(id) }, { status: 200, attempts: 2 });
  });

  test("a condition that reads headers is applied by Sluice on each attempt's response; no policy means no retry", async () => {
    // The backend's failures carry retry-after: 0, which the condition reads (test/e2e/backend-transformation covers
    // a response for which it is false).
    assert.deepEqual(await tryRule(gw, "headers", 503), { status: 200, body: "ok after 2", attempts: 2 });
    assert.deepEqual(await tryRule(gw, "none", 503), { status: 503, body: "failed attempt 1", attempts: 1 });
    const { resources } = (await gw.sluice.status()) as {
      resources: { kind: string; name: string; status: unknown }[];
    };
    const status = JSON.stringify(resources.find((x) => x.kind === "GwPolicy" && x.name === "headers")?.status);
    assert.doesNotMatch(status, /retry\.condition/);
  });
});
