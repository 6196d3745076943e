// backend/tunnel.ts: which proxy a `tunnel` names, and why one cannot be had.

import assert from "node:assert/strict";
import { test } from "node:test";
import { resolveTunnel, type TunnelRefs } from "../../src/translate/backend/tunnel.js";

const refs: TunnelRefs = {
  service: (name, port) =>
    name === "egress" && port === 3128
      ? {
          ok: true,
          port: 3128,
          http2: false,
          endpoints: [
            { address: "10.0.0.2", port: 3128, ready: false },
            { address: "10.0.0.3", port: 3128, ready: true },
          ],
        }
      : { ok: false, message: `Service ns/${name} not found` },
  gwBackendStatic: (name) =>
    name === "ip"
      ? { host: "192.0.2.1", port: 8080 }
      : name === "v6"
        ? { host: "2001:db8::1", port: 1 }
        : name === "ai"
          ? "not-static"
          : undefined,
};

test("a Service proxy is its first ready endpoint; a static GwBackend its IP address (v4 or v6)", () => {
  assert.deepEqual(resolveTunnel({ backendRef: { name: "egress", port: 3128 } }, "ns", refs), {
    ok: true,
    tunnel: { address: "10.0.0.3", port: 3128, proxy: "Service ns/egress" },
  });
  const gw = (name: string) =>
    resolveTunnel({ backendRef: { group: "sluice.dev", kind: "GwBackend", name } }, "ns", refs);
  assert.deepEqual(gw("ip"), { ok: true, tunnel: { address: "192.0.2.1", port: 8080, proxy: "GwBackend ns/ip" } });
  assert.equal(gw("v6").ok, true);
});

test("what cannot be a proxy is said, naming it", () => {
  const message = (v: unknown) => {
    const r = resolveTunnel(v, "ns", refs);
    assert.equal(r.ok, false);
    return r.ok ? "" : r.message;
  };
  assert.match(message({}), /backendRef is required/);
  assert.match(
    message({ backendRef: { name: "egress", port: 3128, namespace: "other" } }),
    /another namespace \(other\)/,
  );
  assert.match(message({ backendRef: { name: "nope", port: 1 } }), /Service ns\/nope not found/);
  assert.match(
    message({ backendRef: { group: "sluice.dev", kind: "GwBackend", name: "gone" } }),
    /GwBackend ns\/gone not found/,
  );
  assert.match(
    message({ backendRef: { group: "sluice.dev", kind: "GwBackend", name: "ai" } }),
    /must be a static host and port/,
  );
  assert.match(
    message({ backendRef: { group: "example.com", kind: "Proxy", name: "p" } }),
    /a Service or a GwBackend \(got example.com\/Proxy\)/,
  );
});
