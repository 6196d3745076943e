// The test helper's Prometheus text parser (test/helpers/prom-text.ts) against prom-client's own output, escapes,
// special values and malformed input: the e2e tests' metric assertions are only as good as this parser.

import assert from "node:assert/strict";
import { test } from "node:test";
import { Counter, Gauge, Histogram, Registry } from "prom-client";
import { parsePrometheusText, sampleSum, sampleValue } from "../helpers/prom-text.js";

test("reads prom-client's counters, gauges and histograms by name and labels", async () => {
  const r = new Registry();
  const c = new Counter({
    name: "t_requests_total",
    help: "Requests.",
    labelNames: ["route", "outcome"],
    registers: [r],
  });
  const g = new Gauge({ name: "t_open", help: "Open now.", registers: [r] });
  const h = new Histogram({ name: "t_seconds", help: "Time.", labelNames: ["m"], buckets: [0.1, 1], registers: [r] });
  c.labels("a", "ok").inc(3);
  c.labels('we"ird\\ro\nute', "error").inc();
  g.set(-2.5);
  h.labels("x").observe(0.05);
  h.labels("x").observe(0.5);
  h.labels("x").observe(5);
  const f = parsePrometheusText(await r.metrics());
  assert.equal(f.get("t_requests_total")?.type, "counter");
  assert.equal(f.get("t_requests_total")?.help, "Requests.");
  assert.equal(sampleValue(f, "t_requests_total", { route: "a", outcome: "ok" }), 3);
  assert.equal(sampleValue(f, "t_requests_total", { route: 'we"ird\\ro\nute' }), 1);
  assert.equal(sampleValue(f, "t_open"), -2.5);
  assert.equal(f.get("t_seconds")?.type, "histogram");
  assert.equal(sampleValue(f, "t_seconds_bucket", { m: "x", le: "0.1" }), 1);
  assert.equal(sampleValue(f, "t_seconds_bucket", { m: "x", le: "1" }), 2);
  assert.equal(sampleValue(f, "t_seconds_bucket", { m: "x", le: "+Inf" }), 3);
  assert.equal(sampleValue(f, "t_seconds_count", { m: "x" }), 3);
  assert.equal(sampleValue(f, "t_seconds_sum", { m: "x" }), 5.55);
  assert.equal(f.get("t_seconds")?.samples.length, 5, "buckets, sum and count are the histogram's");
  assert.equal(sampleSum(f, "t_requests_total"), 4);
  assert.equal(sampleValue(f, "t_requests_total", { route: "none" }), 0);
  assert.throws(() => sampleValue(f, "t_requests_total"), /2 samples/);
});

test("special values, timestamps and comments", () => {
  const f = parsePrometheusText(
    '# a comment\n# TYPE x gauge\nx{a="1"} NaN\nx{a="2"} +Inf 1700000000000\nx{a="3"} -Inf\ny 1e3\nz Nan\n',
  );
  assert.ok(Number.isNaN(sampleValue(f, "x", { a: "1" })));
  assert.equal(sampleValue(f, "x", { a: "2" }), Number.POSITIVE_INFINITY);
  assert.equal(sampleValue(f, "x", { a: "3" }), Number.NEGATIVE_INFINITY);
  assert.equal(sampleValue(f, "y"), 1000);
  assert.equal(f.get("y")?.type, "untyped");
  // As prom-client writes it (an event loop lag gauge before its first sample); Prometheus reads it as NaN too.
  assert.ok(Number.isNaN(sampleValue(f, "z")));
});

test("malformed exposition is an error, not a guess", () => {
  for (const bad of [
    'x{a="1} 1',
    'x{a="1"',
    'x{1a="b"} 1',
    'x{a="\\q"} 1',
    "x one",
    "x",
    'x{a="1",a="2"} 1',
    "# TYPE x nonsense",
    "x 1\n# TYPE x counter",
  ])
    assert.throws(() => parsePrometheusText(bad), Error, bad);
});
