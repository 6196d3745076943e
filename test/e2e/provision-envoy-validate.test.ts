// Every provisioning golden's Envoy must start: its bootstrap ConfigMap and its container's arguments (log levels,
// component levels, drain settings) are checked by `envoy --mode validate` of the pinned Envoy, with the certificate
// files the pod would mount written to a temporary directory (their paths are the only change to the bootstrap).
// Cases whose problems include an error are not provisioned, so not checked.

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { promisify } from "node:util";
import { parseAllDocuments } from "yaml";
import type { Gateway, GatewayClass } from "../../src/api/gateway-api.js";
import type { GwParameters } from "../../src/api/sluice.js";
import { findEnvoy } from "../../src/cli/envoy.js";
import { DEFAULT_ENVOY_IMAGE } from "../../src/provision/defaults.js";
import { XDS_CERT_DIR } from "../../src/provision/names.js";
import { effectiveParameters } from "../../src/provision/parameters.js";
import { type ProvisionSettings, renderProxy } from "../../src/provision/render.js";
import { createCa, issueGatewayCertificate } from "../../src/security/certificates.js";
import { goldenCases, goldenDir } from "../helpers/golden.js";

const run = promisify(execFile);
const dir = goldenDir("provision");

const SETTINGS: ProvisionSettings = {
  xdsHost: "sluice-xds.sluice-system.svc",
  xdsPort: 18000,
  authzPort: 18002,
  mcpPort: 18003,
  adminPort: 19000,
  readyPort: 19003,
  delta: true,
  tls: true,
  image: DEFAULT_ENVOY_IMAGE,
};

let certs: string;

before(async () => {
  certs = mkdtempSync(join(tmpdir(), "sluice-provision-validate-"));
  const ca = await createCa();
  const issued = await issueGatewayCertificate(ca, "app/gw");
  writeFileSync(join(certs, "tls.crt"), issued.cert);
  writeFileSync(join(certs, "tls.key"), issued.key);
  writeFileSync(join(certs, "ca.crt"), issued.ca);
});

after(() => rmSync(certs, { recursive: true, force: true }));

/**
 * What Envoy is started with for a golden (its bootstrap and container arguments), or why a golden provisions no Envoy
 * to check: its parameters have errors (nothing is provisioned), or an overlay replaced the Envoy container.
 */
function provisioned(name: string): { bootstrap: string; args: string[] } | { without: string } {
  const docs = parseAllDocuments(readFileSync(join(dir, `${name}.in.yaml`), "utf8")).map(
    (d) => d.toJS() as { kind: string },
  );
  const gateway = docs.find((d) => d.kind === "Gateway") as Gateway;
  const gatewayClass = docs.find((d) => d.kind === "GatewayClass") as GatewayClass | undefined;
  const params = docs.filter((d) => d.kind === "GwParameters") as GwParameters[];
  const lookup = (ns: string, n: string) =>
    params.find((p) => (p.metadata.namespace ?? "default") === ns && p.metadata.name === n);
  const rendered = renderProxy(gateway, effectiveParameters(gateway, gatewayClass, lookup), SETTINGS);
  if (rendered.problems.some((p) => p.severity === "error")) return { without: "its parameters have errors" };
  const config = rendered.objects.find((o) => o["kind"] === "ConfigMap") as { data: Record<string, string> };
  const workload = rendered.objects.find((o) => o["kind"] === "Deployment" || o["kind"] === "DaemonSet") as {
    spec: { template: { spec: { containers: { name: string; args: string[] }[] } } };
  };
  const container = workload.spec.template.spec.containers.find((c) => c.name === "envoy");
  assert.ok(container !== undefined);
  if (container.args === undefined) return { without: "an overlay replaced the Envoy container and its arguments" };
  return { bootstrap: config.data["bootstrap.yaml"] ?? "", args: container.args };
}

const cases = goldenCases(dir).map((name) => ({ name, p: provisioned(name) }));

test("every provisioning golden is validated, but those that provision no Envoy to check", () => {
  const without = cases.flatMap(({ name, p }) => ("without" in p ? [`${name}: ${p.without}`] : []));
  assert.deepEqual(without, [
    "hpa-daemonset: its parameters have errors",
    "logging-invalid: its parameters have errors",
    "missing-parameters: its parameters have errors",
    "overlay-replace-delete: an overlay replaced the Envoy container and its arguments",
    "overlay-wrong: its parameters have errors",
  ]);
});

for (const { name, p } of cases) {
  if ("without" in p) continue;
  test(`provisioned Envoy of ${name} passes envoy --mode validate`, async () => {
    const file = join(certs, `${name}.yaml`);
    writeFileSync(file, p.bootstrap.replaceAll(XDS_CERT_DIR, certs));
    const args = p.args.map((a) => (a === "/etc/envoy/bootstrap.yaml" ? file : a.replace("$(POD_NAME)", "pod-1")));
    const r = await run(findEnvoy(), ["--mode", "validate", ...args], { timeout: 60_000 }).catch(
      (e: { code?: number; stdout?: string; stderr?: string }) => e,
    );
    assert.ok(!("code" in r) || r.code === undefined || r.code === 0, `${r.stdout ?? ""}${r.stderr ?? ""}`);
  });
}
