// `sluice validate` on files in a temp dir: output format with the line of the offending field, JSON output,
// exit codes; and the status helpers.

import assert from "node:assert/strict";
import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { backendStatus, condition, messages, modelStatus, policyAncestor } from "../../src/api/status.js";
import { runValidate } from "../../src/cli/validate.js";

async function run(args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = "";
  let err = "";
  const code = await runValidate(args, { stdout: (s) => (out += s), stderr: (s) => (err += s) });
  return { code, out, err };
}

const VALID = `apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata:
  name: ok
  namespace: ai
spec:
  static:
    host: example.com
    port: 443
`;

const INVALID = `apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata:
  name: bad
  namespace: shop
spec:
  targetRefs:
    - group: gateway.networking.k8s.io
      kind: Gateway
      name: gw
  traffic:
    rateLimit:
      local:
        - requests: 0
          unit: Seconds
    authorization:
      policy:
        matchExpressions:
          - "jwt.sub =="
  backend:
    mcp:
      authentication:
        jwks:
          jwksPath: /keys
          backendRef: {name: idp, port: 8080}
---
apiVersion: sluice.dev/v1beta1
kind: GwModel
metadata:
  name: m
spec:
  parentRefs: [{name: gw}]
  provider: Provider01
`;

test("valid files: exit 0, nothing on stdout", async () => {
  const dir = await mkdtemp(join(tmpdir(), "sluice-validate-"));
  await writeFile(join(dir, "a.yaml"), VALID);
  const r = await run(["-f", dir]);
  assert.equal(r.code, 0);
  assert.equal(r.out, "");
  assert.match(r.err, /1 document: 1 valid, 0 errors, 0 warnings/);
});

test("invalid files: every problem as file:line: Kind ns/name: path: message, exit 1", async () => {
  const dir = await mkdtemp(join(tmpdir(), "sluice-validate-"));
  const file = join(dir, "sub", "bad.yml");
  await writeFile(join(dir, "good.yaml"), VALID);
  await import("node:fs/promises").then((fs) => fs.mkdir(join(dir, "sub")));
  await writeFile(file, INVALID);
  const r = await run(["-f", dir]);
  assert.equal(r.code, 1);
  const lines = r.out.trimEnd().split("\n");
  assert.deepEqual(lines, [
    `${file}:14: GwPolicy shop/bad: spec.traffic.rateLimit.local[0].requests: must be at least 1 (got 0)`,
    `${file}:19: GwPolicy shop/bad: spec.traffic.authorization.policy.matchExpressions[0]: invalid CEL expression: 1:9: found = but expecting end of input`,
    `${file}:22: GwPolicy shop/bad: spec.backend.mcp.authentication: warning: deprecated: use traffic.jwtAuthentication.mcp instead`,
    `${file}:27: GwModel default/m: apiVersion: apiVersion "sluice.dev/v1beta1" is not served for GwModel; use sluice.dev/v1alpha1`,
  ]);
  assert.match(r.err, /3 documents: 1 valid, 3 errors, 1 warning/);
});

test("--output json lists problems with file, line, resource, path, message and severity", async () => {
  const dir = await mkdtemp(join(tmpdir(), "sluice-validate-"));
  const file = join(dir, "bad.yaml");
  await writeFile(file, INVALID);
  const r = await run(["-f", file, "--output", "json"]);
  assert.equal(r.code, 1);
  const report = JSON.parse(r.out) as {
    documents: number;
    errors: number;
    warnings: number;
    problems: Record<string, unknown>[];
  };
  assert.equal(report.documents, 2);
  assert.equal(report.errors, 3);
  assert.equal(report.warnings, 1);
  assert.deepEqual(report.problems[0], {
    file,
    line: 14,
    resource: "GwPolicy shop/bad",
    path: "spec.traffic.rateLimit.local[0].requests",
    message: "must be at least 1 (got 0)",
    severity: "error",
  });
});

test("only warnings: exit 0", async () => {
  const dir = await mkdtemp(join(tmpdir(), "sluice-validate-"));
  const onlyDeprecated = INVALID.split("---")[0]!
    .replace("requests: 0", "requests: 5")
    .replace('"jwt.sub =="', `"jwt.sub == 'a'"`);
  await writeFile(join(dir, "w.yaml"), onlyDeprecated);
  const r = await run(["-f", dir]);
  assert.equal(r.code, 0, r.out);
  assert.match(r.out, /warning: deprecated: use traffic\.jwtAuthentication\.mcp instead/);
});

test("YAML syntax errors, missing files and usage errors", async () => {
  const dir = await mkdtemp(join(tmpdir(), "sluice-validate-"));
  await writeFile(join(dir, "broken.yaml"), "kind: GwPolicy\nspec: [\n");
  const broken = await run(["-f", dir]);
  assert.equal(broken.code, 1);
  assert.match(broken.out, /broken\.yaml:\d+: /);
  const missing = await run(["-f", join(dir, "nope")]);
  assert.equal(missing.code, 1);
  assert.match(missing.out, /nope: no such file or directory/);
  assert.equal((await run([])).code, 2);
  assert.equal((await run(["-f", dir, "--output", "xml"])).code, 2);
  assert.equal((await run(["--bogus"])).code, 2);
  assert.equal((await run(["--help"])).code, 0);
});

test("status helpers: closed condition set, bounds, the jwt explanation", () => {
  const t = "2026-01-01T00:00:00Z";
  const accepted = condition({
    type: "Accepted",
    status: true,
    reason: "Accepted",
    message: "ok",
    lastTransitionTime: t,
  });
  const attached = condition({
    type: "Attached",
    status: true,
    reason: "Attached",
    message: messages.jwtWithoutAuthentication("spec.traffic.authorization.policy.matchExpressions[0]"),
    lastTransitionTime: t,
    observedGeneration: 3,
  });
  const entry = policyAncestor({ name: "gw" }, [attached, accepted]);
  assert.deepEqual(
    entry.conditions.map((c) => c.type),
    ["Accepted", "Attached"],
  );
  assert.equal(entry.controllerName, "sluice.dev/gateway-controller");
  assert.match(
    entry.conditions[1]!.message,
    /reads jwt but no JWT authentication applies to its targets, so .* denies all traffic/,
  );
  assert.throws(() => policyAncestor({ name: "gw" }, []), RangeError);
  assert.equal(backendStatus([accepted]).conditions?.length, 1);
  assert.throws(
    () =>
      modelStatus(
        Array.from({ length: 17 }, () => ({ parentRef: { name: "g" }, controllerName: "c", conditions: [accepted] })),
      ),
    RangeError,
  );
  assert.match(messages.jwtWithoutAuthentication("p", "Deny"), /never matches and denies nothing/);
});
