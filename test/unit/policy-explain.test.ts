// `sluice explain`: the text a user debugging attachment reads, and the JSON form, on the policy golden inputs.

import assert from "node:assert/strict";
import { join } from "node:path";
import { test } from "node:test";
import { runExplain } from "../../src/cli/explain.js";
import type { CommandIO } from "../../src/cli/io.js";
import { goldenDir } from "../helpers/golden.js";

const dir = goldenDir("policy");

async function explain(args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = "";
  let err = "";
  const io: CommandIO = {
    stdout: (t) => {
      out += t;
    },
    stderr: (t) => {
      err += t;
    },
  };
  const code = await runExplain(args, io);
  return { code, out, err };
}

test("explain: each field with its value, policy and level; lost values with the reason", async () => {
  const file = join(dir, "traffic-precedence-rule-over-route.in.yaml");
  const { code, out, err } = await explain(["-f", file, "--route", "default/api/read"]);
  assert.equal(code, 0, err);
  const lines = out.split("\n");
  assert.equal(lines[0], "HTTPRoute default/api, rule read");
  assert.ok(lines.includes("Gateway default/gw, listener http (port 8080)"), out);
  assert.ok(lines.includes('  rule 0 "read"'), out);
  // Only the requested rule is shown.
  assert.ok(!out.includes("rule 1"), out);
  const i = lines.indexOf("    traffic policy (phase PostRouting):");
  assert.equal(lines[i + 1], '      timeouts  {"request":"2s"}');
  assert.equal(
    lines[i + 2],
    "                  from GwPolicy default/rule-timeouts  [rule: HTTPRoute default/api rule read]",
  );
  assert.ok(
    out.includes(
      "      - GwPolicy default/gateway-timeouts [gateway: Gateway default/gw] (traffic, field timeouts): replaced by GwPolicy default/rule-timeouts (rule, HTTPRoute default/api rule read), which is more specific",
    ),
    out,
  );
});

test("explain: Override exclusions, combined authorization rules and rejected targets", async () => {
  const excluded = await explain([
    "-f",
    join(dir, "override-excludes-more-specific.in.yaml"),
    "--route",
    "default/api",
  ]);
  assert.match(
    excluded.out,
    /GwPolicy default\/route-traffic \[route: HTTPRoute default\/api\] \(traffic, whole section\): excluded by GwPolicy default\/gateway-override/,
  );

  const combined = await explain(["-f", join(dir, "authorization-rules-combine.in.yaml"), "--route", "default/api/0"]);
  assert.match(combined.out, /authorization {2}2 rule\(s\) combined:/);
  assert.match(combined.out, /from GwPolicy default\/allow-team {2}\[gateway: Gateway default\/gw\]/);
  assert.match(combined.out, /from GwPolicy default\/deny-blocked {2}\[gateway: Gateway default\/gw\]/);

  const rejected = await explain(["-f", join(dir, "prerouting-rejected-on-route.in.yaml"), "--route", "default/api"]);
  assert.match(
    rejected.out,
    /- GwPolicy default\/route-pre: Invalid: spec\.targetRefs\[0\]\.kind: phase PreRouting requires Gateway or Listener targets/,
  );
});

test("explain: backend policy per backend and sub-backend", async () => {
  const { out } = await explain(["-f", join(dir, "provider-policies-win.in.yaml"), "--route", "default/llm"]);
  assert.match(out, /GwBackend default\/llm \(cluster backend\/default\/llm\):/);
  assert.match(
    out,
    /sub-backend primary:\n\s+auth {2}\{"secretRef":\{"name":"primary-key"[^\n]*\n\s+from GwBackend default\/llm {2}\[subBackend: GwBackend default\/llm provider primary\]/,
  );
});

test("explain --output json: the same sites, machine-readable", async () => {
  const file = join(dir, "shallow-merge-keeps-other-fields.in.yaml");
  const { code, out } = await explain(["-f", file, "--route", "default/api", "--output", "json"]);
  assert.equal(code, 0);
  const doc = JSON.parse(out) as {
    route: string;
    sites: { rule: number; policy: { traffic: Record<string, { from: { name: string; level: string } }> } }[];
  };
  assert.equal(doc.route, "default/api");
  assert.deepEqual(
    doc.sites.map((s) => s.rule),
    [0, 1],
  );
  const traffic = doc.sites[0]?.policy.traffic ?? {};
  assert.deepEqual(Object.keys(traffic), ["cors", "jwtAuthentication", "timeouts"]);
  assert.deepEqual(traffic["cors"]?.from, {
    kind: "GwPolicy",
    name: "default/route-cors",
    level: "route",
    target: "HTTPRoute default/api",
  });
  assert.equal(traffic["timeouts"]?.from.level, "gateway");
});

test("explain: routes not served, unknown routes and rules", async () => {
  const detached = await explain(["-f", join(dir, "not-attached-reported.in.yaml"), "--route", "default/detached"]);
  assert.equal(detached.code, 0);
  assert.match(detached.out, /Not served by any Gateway of Sluice, so no policy applies/);

  const missing = await explain(["-f", join(dir, "not-attached-reported.in.yaml"), "--route", "default/nope"]);
  assert.equal(missing.code, 1);
  assert.match(missing.err, /HTTPRoute default\/nope not found/);

  const rule = await explain([
    "-f",
    join(dir, "traffic-precedence-rule-over-route.in.yaml"),
    "--route",
    "default/api/x",
  ]);
  assert.equal(rule.code, 1);
  assert.match(rule.err, /has no rule x; its rules: 0 \(read\), 1/);

  const usage = await explain(["-f", join(dir, "traffic-precedence-rule-over-route.in.yaml")]);
  assert.equal(usage.code, 2);
});
