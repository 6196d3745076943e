// The request path's own counters and histograms (src/observability/series.ts): what they write is valid Prometheus
// text (read back with the test parser) and holds exactly what was counted, labels escaped.

import assert from "node:assert/strict";
import { test } from "node:test";
import { Series } from "../../src/observability/series.js";
import { parsePrometheusText, sampleValue } from "../helpers/prom-text.js";

test("counters and histograms write what was counted, cumulative buckets, escaped labels", () => {
  const s = new Series();
  const c = s.counter("x_total", "Things.", ["a", "b"]);
  const h = s.histogram("x_seconds", "Time.", ["m"], [0.1, 1, 10]);
  c.labels("one", "ok").inc();
  c.labels("one", "ok").inc(4);
  c.labels('q"uo\\te\n', "err").inc(2);
  for (const v of [0.05, 0.1, 0.5, 2, 20]) h.labels("get").observe(v);
  const f = parsePrometheusText(s.text());
  assert.equal(f.get("x_total")?.type, "counter");
  assert.equal(f.get("x_seconds")?.type, "histogram");
  assert.equal(sampleValue(f, "x_total", { a: "one", b: "ok" }), 5);
  assert.equal(sampleValue(f, "x_total", { a: 'q"uo\\te\n' }), 2);
  const bucket = (le: string) => sampleValue(f, "x_seconds_bucket", { m: "get", le });
  assert.deepEqual(["0.1", "1", "10", "+Inf"].map(bucket), [2, 3, 4, 5]);
  assert.equal(sampleValue(f, "x_seconds_count", { m: "get" }), 5);
  assert.equal(sampleValue(f, "x_seconds_sum", { m: "get" }), 22.65);
});

test("a family with no samples yet is written as HELP and TYPE only; output is sorted by label values", () => {
  const s = new Series();
  const c = s.counter("y_total", "Y.", ["k"]);
  assert.equal(s.text(), "# HELP y_total Y.\n# TYPE y_total counter\n");
  c.labels("b").inc();
  c.labels("a").inc();
  assert.deepEqual(
    s
      .text()
      .split("\n")
      .filter((l) => l.startsWith("y_total")),
    ['y_total{k="a"} 1', 'y_total{k="b"} 1'],
  );
});
