// Frontend telemetry CEL (src/translate/xds/frontend-telemetry.ts and the end-of-stream vocabulary of envoy-cel.ts):
// what becomes Envoy's CEL, what is refused and why, and the sampler's combined expression.

import assert from "node:assert/strict";
import { test } from "node:test";
import { fromBinary } from "@bufbuild/protobuf";
import type { ContextValue } from "../../src/extproc/context.js";
import { ConfigSchema as StatsLoggerSchema } from "../../src/gen/envoy/extensions/access_loggers/stats/v3/stats_pb.js";
import { CELSamplerConfigSchema } from "../../src/gen/envoy/extensions/tracers/opentelemetry/samplers/v3/cel_sampler_pb.js";
import { endFormat, toDefaultEnvoyCel, toEnvoyCel } from "../../src/translate/xds/filters/envoy-cel.js";
import { metricsLogger, tracingResources, tracingSampling } from "../../src/translate/xds/frontend-telemetry.js";

type Notes = [string, string][];
const collect = (): [Notes, (f: string, m: string) => void] => {
  const notes: Notes = [];
  return [notes, (f, m) => notes.push([f, m])];
};

test("at the end of the stream: response, source, apiKey and every llm field", () => {
  assert.equal(toEnvoyCel("response.code", { atEnd: true }), "response.code");
  assert.equal(toEnvoyCel("response.code"), undefined, "not before the response");
  assert.equal(
    toEnvoyCel("apiKey.tier == 'gold'", { atEnd: true }),
    "metadata.filter_metadata['envoy.filters.http.ext_authz']['apiKey']['tier'] == 'gold'",
  );
  assert.equal(toEnvoyCel("apiKey", { atEnd: true }), undefined, "only member reads");
  assert.equal(
    toEnvoyCel("llm.outputTokens", { atEnd: true }),
    "metadata.filter_metadata['sluice.dev/llm']['output_tokens']",
  );
  assert.equal(toEnvoyCel("llm.outputTokens", { llm: true }), undefined, "token counts only at the end");
  assert.equal(toEnvoyCel("llm.nothing", { atEnd: true }), undefined);
  assert.match(toEnvoyCel("source.address", { atEnd: true }) ?? "", /lastIndexOf\(':'\)/);
  assert.equal(toEnvoyCel("source.port > 1024", { atEnd: true }), "source.port > 1024");
  assert.equal(
    toEnvoyCel("cidr('10.0.0.0/8').containsIP(source.address)", { atEnd: true }),
    undefined,
    "Envoy has no IP library",
  );
  assert.equal(toEnvoyCel("basicAuth.username", { atEnd: true }), undefined);
});

test("request.query by a literal name, only where string functions are on; other uses refused", () => {
  const e = toEnvoyCel("request.query['page']", { atEnd: true, queryParams: true }) ?? "";
  assert.match(e, /indexOf\('&page='\)/);
  assert.match(e, /\{\}\['page'\]/, "a missing parameter fails, as the spec's map lookup");
  assert.equal(toEnvoyCel("request.query['page']", { atEnd: true }), undefined);
  assert.equal(toEnvoyCel("size(request.query)", { atEnd: true, queryParams: true }), undefined);
  assert.equal(
    toEnvoyCel("'request.query' + request.headers['x']", { atEnd: true, queryParams: true }),
    "'request.query' + request.headers['x']",
    "inside a string literal it is text",
  );
});

test("Envoy's default CEL (span and stat tags, the sampler): no string conversion or string functions", () => {
  assert.equal(
    toDefaultEnvoyCel("string(response.code)", { atEnd: true }),
    "response.code",
    "outermost string() dropped",
  );
  assert.equal(toDefaultEnvoyCel("request.path.lowerAscii()"), undefined);
  assert.equal(toDefaultEnvoyCel("string(response.code) + 'x'", { atEnd: true }), undefined);
  assert.equal(endFormat("source.address"), "%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%");
  assert.equal(endFormat("response.code / 100"), "%CEL(response.code / 100)%");
  assert.equal(endFormat("request.query['a']"), undefined);
});

test("sampling: constants stay the HCM's percentages; otherwise one CEL sampler", () => {
  const [n1, note1] = collect();
  assert.deepEqual(tracingSampling({ randomSampling: "0.5" }, note1), { random: 50, client: 100 });
  assert.deepEqual(tracingSampling({}, note1), { random: 0, client: 100 });
  assert.deepEqual(n1, []);

  const [n2, note2] = collect();
  const s = tracingSampling(
    {
      randomSampling: "request.headers['x-debug'] == 'on'",
      clientSampling: "0.25",
      filter: "request.method != 'HEAD'",
    },
    note2,
  );
  assert.deepEqual(n2, []);
  assert.equal(s.random, 100);
  assert.equal(s.sampler?.name, "envoy.tracers.opentelemetry.samplers.cel");
  const any = s.sampler?.typedConfig;
  assert.ok(any !== undefined && "value" in any);
  const config = fromBinary(CELSamplerConfigSchema, any.value as Uint8Array);
  const text = JSON.stringify(config.expression?.celExprParsed?.expr, (_k, v) =>
    typeof v === "bigint" ? String(v) : v,
  );
  assert.match(text, /traceparent/);
  assert.match(text, /"40000000"/, "25 % of x-request-id's first 32 bits");
  assert.match(text, /x-debug/);
  assert.match(text, /HEAD/);
});

test("sampling: expressions the span's start cannot see are reported, not guessed", () => {
  const [notes, note] = collect();
  // A filter reading the response is decided when the span ends, by Sluice's span relay (frontend-span-relay e2e), not
  // by the sampler: only the sampling rate is reported here.
  const s = tracingSampling({ randomSampling: "jwt.sub == 'x'", filter: "response.code == 500" }, note);
  assert.deepEqual(
    notes.map(([f]) => f),
    ["randomSampling"],
  );
  assert.deepEqual(s, { random: 0, client: 100 });
});

test("resources: constant expressions evaluated once; per-request ones reported", () => {
  const [notes, note] = collect();
  const r = tracingResources(
    [
      { name: "env", expression: "'pr' + 'od'" },
      { name: "n", expression: "1 + 2" },
      { name: "h", expression: "request.headers['x']" },
    ],
    note,
  );
  assert.deepEqual(
    notes.map(([f]) => f),
    ["resources[2]"],
  );
  assert.equal(r?.name, "envoy.tracers.opentelemetry.resource_detectors.static_config");
  assert.equal(
    tracingResources([{ name: "h", expression: "request.path" }], () => {}),
    undefined,
  );
});

test("metrics: one tag per attribute, Envoy's CEL where it can, else a value Sluice's telemetry stage computes", () => {
  const [notes, note] = collect();
  const values: ContextValue[] = [];
  const log = metricsLogger(
    {
      attributes: {
        add: [
          { name: "tenant", expression: "request.headers['x-tenant']" },
          { name: "page", expression: "request.query['page']" },
          { name: "bad", expression: "request.headers[" },
        ],
      },
    },
    note,
    values,
  );
  assert.equal(log?.name, "envoy.access_loggers.stats");
  assert.deepEqual(
    notes.map(([f]) => f),
    ["attributes.add[2]"],
  );
  assert.deepEqual(values, [
    { namespace: "sluice.context", key: "metrics.attributes.1", expression: "request.query['page']", as: "text" },
  ]);
  const any = log?.configType?.value;
  assert.ok(any !== undefined && "value" in any);
  const config = fromBinary(StatsLoggerSchema, any.value as Uint8Array);
  assert.deepEqual(
    config.counters[0]?.stat?.tags.map((t) => t.valueFormat),
    ["%CEL(request.headers['x-tenant'])%", "%DYNAMIC_METADATA(sluice.context:metrics.attributes.1)%"],
  );
  assert.equal(
    metricsLogger({ attributes: { add: [{ name: "p", expression: "request.query[" }] } }, () => {}, []),
    undefined,
  );
});

test("sampling: `<condition> ? <number> : <number>` becomes a sampler branch; other numbers are reported", () => {
  const [notes, note] = collect();
  const s = tracingSampling({ randomSampling: "request.headers['x-tier'] == 'gold' ? 1.0 : 0.5" }, note);
  assert.deepEqual(notes, []);
  const any = s.sampler?.typedConfig;
  assert.ok(any !== undefined && "value" in any);
  const text = JSON.stringify(
    fromBinary(CELSamplerConfigSchema, any.value as Uint8Array).expression?.celExprParsed?.expr,
    (_k, v) => (typeof v === "bigint" ? String(v) : v),
  );
  assert.match(text, /x-tier/);
  assert.match(text, /"80000000"/, "the 0.5 branch: half of x-request-id's range");
  const [n2, note2] = collect();
  assert.deepEqual(tracingSampling({ randomSampling: "double(request.headers['x-rate'])" }, note2), {
    random: 0,
    client: 100,
  });
  assert.deepEqual(
    n2.map(([f]) => f),
    ["randomSampling"],
  );
});
