// backendTls (src/translate/xds/backend-tls.ts): what a backend.tls value becomes, and what makes it fail closed.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { projectRoot } from "../../src/cli/paths.js";
import { makeInput } from "../../src/translate/input.js";
import type { PolicySourceIR } from "../../src/translate/ir.js";
import { backendTls } from "../../src/translate/xds/backend-tls.js";

const pem = readFileSync(join(projectRoot(), "test", "fixtures", "tls", "example.com.crt"), "utf8");
const from: PolicySourceIR = { kind: "GwPolicy", name: "default/p", level: "backend", target: "Service default/app" };
const configMap = (name: string, ca: string) => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  metadata: { name, namespace: "default" },
  data: { "ca.crt": ca },
});
const input = makeInput([
  configMap("good", pem),
  configMap("bad", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----"),
] as never);

test("a Service: SNI and the required name default to its cluster DNS name; the system CAs", () => {
  const r = backendTls({}, from, "Service default/app port 80", undefined, input);
  assert.ok(r.ok);
  if (r.ok) {
    assert.equal(r.tls.sni, "app.default.svc.cluster.local");
    assert.deepEqual(r.tls.sans, ["app.default.svc.cluster.local"]);
    assert.equal(r.tls.ca, undefined);
  }
});

test("an IP backend: no SNI and no name check; insecureSkipVerify drops the name check", () => {
  const ip = backendTls(
    {},
    from,
    "GwBackend default/legacy",
    { kind: "static", name: "c", endpoints: [], http2: false },
    input,
  );
  assert.ok(ip.ok && ip.tls.sni === undefined && ip.tls.sans.length === 0);
  const skip = backendTls(
    { insecureSkipVerify: "Hostname", sni: "x.example" },
    from,
    "Service default/app port 80",
    undefined,
    input,
  );
  assert.ok(skip.ok && skip.tls.sni === "x.example" && skip.tls.sans.length === 0 && skip.tls.insecure === "Hostname");
});

test("a CA ConfigMap: used when it parses; missing or not a certificate fails closed with the reason", () => {
  const good = backendTls(
    { caCertificateRefs: [{ name: "good" }] },
    from,
    "Service default/app port 80",
    undefined,
    input,
  );
  assert.ok(good.ok && good.tls.ca === pem);
  const bad = backendTls(
    { caCertificateRefs: [{ name: "bad" }] },
    from,
    "Service default/app port 80",
    undefined,
    input,
  );
  assert.ok(!bad.ok && /holds no valid PEM certificate/.test(bad.message));
  const missing = backendTls(
    { caCertificateRefs: [{ name: "gone" }] },
    from,
    "Service default/app port 80",
    undefined,
    input,
  );
  assert.ok(
    !missing.ok &&
      /ConfigMap default\/gone key ca.crt not found; requests to Service default\/app port 80 are answered 503/.test(
        missing.message,
      ),
  );
});
