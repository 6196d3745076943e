// Golden tests of provisioning: test/golden/provision/<case>.in.yaml (a Gateway, maybe its GatewayClass, and the
// GwParameters they name) → <case>.out.yaml (the problems, then every object Sluice would apply). A bootstrap equal to
// the default case's is shown as a reference to it, so each golden shows what its field changes.
// Regenerate with UPDATE_GOLDEN=1; review the diff.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { parseAllDocuments, stringify } from "yaml";
import type { Gateway, GatewayClass } from "../../src/api/gateway-api.js";
import type { GwParameters } from "../../src/api/sluice.js";
import { projectRoot } from "../../src/cli/paths.js";
import { DEFAULT_ENVOY_IMAGE, ENVOY_VERSION } from "../../src/provision/defaults.js";
import { effectiveParameters } from "../../src/provision/parameters.js";
import { type ProvisionSettings, renderProxy } from "../../src/provision/render.js";
import { assertGolden, goldenCases, goldenDir, orphanedGoldens } from "../helpers/golden.js";

const dir = goldenDir("provision");

export const GOLDEN_SETTINGS: ProvisionSettings = {
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

function render(file: string) {
  const docs = parseAllDocuments(readFileSync(file, "utf8")).map((d) => d.toJS() as { kind: string });
  const gateway = docs.find((d) => d.kind === "Gateway") as Gateway | undefined;
  if (gateway === undefined) throw new Error(`${file}: no Gateway`);
  const gatewayClass = docs.find((d) => d.kind === "GatewayClass") as GatewayClass | undefined;
  const params = docs.filter((d) => d.kind === "GwParameters") as GwParameters[];
  const lookup = (ns: string, name: string) =>
    params.find((p) => (p.metadata.namespace ?? "default") === ns && p.metadata.name === name);
  return renderProxy(gateway, effectiveParameters(gateway, gatewayClass, lookup), GOLDEN_SETTINGS);
}

const defaultBootstrap = (): string | undefined => {
  const config = render(join(dir, "default.in.yaml")).objects.find((o) => o["kind"] === "ConfigMap");
  return (config?.["data"] as Record<string, string> | undefined)?.["bootstrap.yaml"];
};

function goldenYaml(file: string): string {
  const out = render(file);
  const base = defaultBootstrap();
  const objects = out.objects.map((o) => {
    if (o["kind"] !== "ConfigMap" || file.endsWith("default.in.yaml")) return o;
    const data = o["data"] as Record<string, string>;
    return data["bootstrap.yaml"] === base ? { ...o, data: { "bootstrap.yaml": "(as in default.out.yaml)" } } : o;
  });
  const problems = [...out.problems].map((p) => ({
    severity: p.severity,
    ...(p.parameters !== undefined ? { parameters: p.parameters } : {}),
    path: p.path,
    message: p.message,
  }));
  return [
    stringify({ problems }, { lineWidth: 0 }),
    ...[...objects, out.sessionKeySecret].map((o) => stringify(o, { lineWidth: 0 })),
  ].join("---\n");
}

for (const name of goldenCases(dir)) {
  test(`provision golden: ${name}`, () => {
    assertGolden(join(dir, `${name}.out.yaml`), goldenYaml(join(dir, `${name}.in.yaml`)));
  });
}

test("provision goldens: no orphaned outputs", () => {
  assert.deepEqual(orphanedGoldens(dir), []);
});

test("provision: rendering twice gives the same objects, byte for byte", () => {
  for (const name of goldenCases(dir)) {
    const file = join(dir, `${name}.in.yaml`);
    assert.equal(JSON.stringify(render(file)), JSON.stringify(render(file)), name);
  }
});

test("provision: the default image is the Envoy version scripts/versions.sh pins", () => {
  const versions = readFileSync(join(projectRoot(), "scripts", "versions.sh"), "utf8");
  assert.match(versions, new RegExp(`^ENVOY_VERSION=${ENVOY_VERSION.replaceAll(".", "\\.")}$`, "m"));
  assert.equal(DEFAULT_ENVOY_IMAGE.tag, `v${ENVOY_VERSION}`);
});

test("provision: Envoy drains for shutdown.max (listener updates cut requests after --drain-time-s); min is the preStop's least wait", () => {
  type Pod = {
    terminationGracePeriodSeconds: number;
    containers: { name: string; args?: string[]; lifecycle?: { preStop?: { exec: { command: string[] } } } }[];
  };
  let checked = 0;
  for (const name of goldenCases(dir)) {
    const file = join(dir, `${name}.in.yaml`);
    const docs = parseAllDocuments(readFileSync(file, "utf8")).map((d) => d.toJS() as Record<string, unknown>);
    // The Gateway level's, when both set it: in the goldens it comes after the class level's.
    const asked = docs.findLast((d) => d["kind"] === "GwParameters" && (d["spec"] as { shutdown?: unknown }).shutdown);
    const shutdown = (asked?.["spec"] as { shutdown?: { min: number; max: number } } | undefined)?.shutdown ?? {
      min: 10,
      max: 60,
    };
    for (const o of render(file).objects) {
      if (o["kind"] !== "Deployment" && o["kind"] !== "DaemonSet") continue;
      const pod = (o["spec"] as { template: { spec: Pod } }).template.spec;
      const envoy = pod.containers.find((c) => c.name === "envoy");
      assert.ok(envoy !== undefined, name);
      // An overlay that replaced the container or deleted its hook is the user's (overlay-replace-delete).
      if (envoy.args === undefined || envoy.lifecycle?.preStop === undefined) continue;
      assert.equal(envoy.args[envoy.args.indexOf("--drain-time-s") + 1], String(shutdown.max), name);
      assert.equal(pod.terminationGracePeriodSeconds, shutdown.max, name);
      assert.match(envoy.lifecycle.preStop.exec.command.at(-1) ?? "", new RegExp(`\\nsleep ${shutdown.min}\\n`), name);
      checked++;
    }
  }
  assert.ok(checked >= 10, `${checked} workloads checked`);
});
