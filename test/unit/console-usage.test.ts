// The console's usage figures: the last hour of Sluice's counters, by route and model (LLM) and by target (MCP),
// from samples of /metrics a minute apart; and its reader of the Prometheus text format.

import assert from "node:assert/strict";
import { test } from "node:test";
import { parsePrometheusText } from "../../src/console/prom-text.js";
import { MetricsHistory } from "../../src/console/usage.js";

function metrics(tokens: { input: number; output: number }, requests: number, mcp = 0): string {
  const l = 'gateway="default/gw",route="default/chat",provider="default",model="gpt-4o"';
  return `# HELP sluice_llm_requests_total x
# TYPE sluice_llm_requests_total counter
sluice_llm_requests_total{${l},outcome="ok"} ${requests}
sluice_llm_requests_total{${l},outcome="error"} 1
# TYPE sluice_llm_tokens_total counter
sluice_llm_tokens_total{${l},type="input"} ${tokens.input}
sluice_llm_tokens_total{${l},type="output"} ${tokens.output}
sluice_llm_tokens_total{gateway="default/gw",route="default/other",provider="default",model="other",type="input"} 0
sluice_mcp_target_requests_total{backend="default/tools",target="alpha",method="tools/call"} ${mcp}
sluice_mcp_target_errors_total{backend="default/tools",target="alpha",method="tools/call"} 0
`;
}

test("the reader takes labels with escapes, skips comments, and leaves out what it cannot read", () => {
  const s = parsePrometheusText(
    'a_total{x="q\\"uote",y="new\\nline",z="back\\\\slash"} 3\n# HELP b x\nb 1.5 1700000000\nc{broken 1\nd +Inf\ne Nan\nf nope\n',
  );
  assert.deepEqual(
    s.map((x) => [x.name, x.labels, x.value]),
    [
      ["a_total", { x: 'q"uote', y: "new\nline", z: "back\\slash" }, 3],
      ["b", {}, 1.5],
      ["d", {}, Number.POSITIVE_INFINITY],
      ["e", {}, Number.NaN],
    ],
  );
});

test("a process younger than an hour counts from its start; rows with no traffic are left out", async () => {
  const t0 = Date.parse("2026-01-01T00:00:00Z");
  let text = metrics({ input: 0, output: 0 }, 0);
  const h = new MetricsHistory(() => text, t0);
  await h.sample(t0);
  text = metrics({ input: 110, output: 70 }, 10, 4);
  const u = await h.usage(t0 + 30 * 60_000);
  assert.equal(u.since, new Date(t0).toISOString());
  assert.deepEqual(u.llm, [
    {
      gateway: "default/gw",
      route: "default/chat",
      provider: "default",
      model: "gpt-4o",
      requests: 11,
      errors: 1,
      inputTokens: 110,
      outputTokens: 70,
      cachedInputTokens: 0,
      reasoningTokens: 0,
    },
  ]);
  assert.deepEqual(u.mcp, [{ backend: "default/tools", target: "alpha", requests: 4, errors: 0, seconds: 0 }]);
});

test("an older process counts only the last hour: the sample from an hour ago is subtracted", async () => {
  const t0 = Date.parse("2026-01-01T00:00:00Z");
  let text = metrics({ input: 0, output: 0 }, 0);
  const h = new MetricsHistory(() => text, t0);
  // A sample a minute, as the timer takes them; traffic before the window and inside it.
  for (let m = 1; m <= 90; m++) {
    text = metrics({ input: m * 10, output: m }, m);
    await h.sample(t0 + m * 60_000);
  }
  const now = t0 + 90 * 60_000;
  const u = await h.usage(now);
  // The base is the sample at minute 30: 90 - 30 minutes of traffic.
  assert.equal(u.since, new Date(t0 + 30 * 60_000).toISOString());
  assert.equal(u.llm[0]?.inputTokens, 600);
  assert.equal(u.llm[0]?.outputTokens, 60);
  assert.equal(u.llm[0]?.requests, 60);
  // The error series did not move in the window.
  assert.equal(u.llm[0]?.errors, 0);
});

test("a counter that went back (a restart of the series) counts from zero", async () => {
  const t0 = Date.parse("2026-01-01T00:00:00Z");
  let text = metrics({ input: 500, output: 50 }, 5);
  const h = new MetricsHistory(() => text, t0);
  await h.sample(t0 - 2 * 60 * 60_000);
  await h.sample(t0 - 61 * 60_000);
  text = metrics({ input: 20, output: 2 }, 2);
  const u = await h.usage(t0);
  assert.equal(u.llm[0]?.inputTokens, 20);
});
