// Sluice's logging (src/observability/log.ts): the --log-level grammar, per-module levels, the three formats, the
// sorting of `log(line)` callbacks into modules and levels, and a request's ids on the lines written while it runs.

import assert from "node:assert/strict";
import { test } from "node:test";
import { withRequestContext } from "../../src/observability/context.js";
import {
  configureLogging,
  levelOfLine,
  lineLogger,
  moduleLogger,
  moduleOfLine,
  parseLevelSpec,
  requestDebug,
} from "../../src/observability/log.js";
import { applyObservability } from "../../src/observability/options.js";

function capture(spec: string, format: "json" | "text" | "pretty"): string[] {
  const lines: string[] = [];
  const levels = parseLevelSpec(spec);
  assert.ok(typeof levels !== "string", String(levels));
  configureLogging({ levels, format, write: (s) => lines.push(...s.split("\n").filter((l) => l !== "")) });
  return lines;
}

test("--log-level: a default and per-module overrides; errors name the flag and what is valid", () => {
  const s = parseLevelSpec("warn,xds=debug, llm=error");
  assert.ok(typeof s !== "string");
  assert.equal(s.level, "warn");
  assert.deepEqual(
    [...s.modules],
    [
      ["xds", "debug"],
      ["llm", "error"],
    ],
  );
  const only = parseLevelSpec("xds=trace");
  assert.ok(typeof only !== "string");
  assert.equal(only.level, "info");
  assert.match(String(parseLevelSpec("loud")), /--log-level: "loud" is not a level; use one of trace, debug/);
  assert.match(String(parseLevelSpec("=debug")), /names no module/);
  assert.throws(() => applyObservability({ "log-format": "xml" }, "text", () => {}), /--log-format must be json/);
  assert.throws(() => applyObservability({ "request-metrics": "maybe" }, "text", () => {}), /on or off/);
});

test("per-module levels decide what is written", () => {
  const lines = capture("warn,xds=debug", "text");
  moduleLogger("xds").debug("xds: push");
  moduleLogger("llm").info("llm: not written");
  moduleLogger("llm").warn("llm: written");
  assert.deepEqual(lines, ["xds: push", "llm: written"]);
});

test("json: level, time, module and message; fields as they are", () => {
  const lines = capture("info", "json");
  moduleLogger("authz").warn({ policy: "p-1" }, "ext_authz: unknown policy id");
  assert.equal(lines.length, 1);
  const o = JSON.parse(lines[0] as string) as Record<string, unknown>;
  assert.equal(o["level"], "warn");
  assert.equal(o["module"], "authz");
  assert.equal(o["policy"], "p-1");
  assert.equal(o["msg"], "ext_authz: unknown policy id");
  assert.ok(!Number.isNaN(Date.parse(String(o["time"]))));
});

test("text: the message then key=value fields; pretty: a readable line with the level", () => {
  const text = capture("info", "text");
  moduleLogger("xds").info({ node: "n1", n: 2 }, "xds: stream");
  assert.deepEqual(text, ['xds: stream node="n1" n=2']);
  const pretty = capture("info", "pretty");
  moduleLogger("xds").warn({ node: "n1" }, "xds warning: NACK");
  assert.equal(pretty.length >= 1, true);
  assert.match(pretty.join("\n"), /WARN.*xds warning: NACK/);
  assert.match(pretty.join("\n"), /node: "n1"/);
});

test("log(line) callbacks: sorted into modules by their prefix, levels by what they say", () => {
  assert.equal(moduleOfLine("xds warning: configuration rejected (NACK)"), "xds");
  assert.equal(moduleOfLine("llm provider openai: request rejected: x"), "llm");
  assert.equal(moduleOfLine("ext_authz: unknown policy id, denying (fail closed)"), "authz");
  assert.equal(moduleOfLine("envoy[default/gw] [warning] something"), "envoy");
  assert.equal(moduleOfLine("sluice: ADS on 127.0.0.1:18000"), "sluice");
  assert.equal(levelOfLine("sluice: ADS on 127.0.0.1:18000"), "info");
  assert.equal(levelOfLine("ext_authz: internal error, denying"), "warn");
  assert.equal(levelOfLine("sluice: cannot start Envoy for default/gw: spawn failed"), "error");
  const lines = capture("info,llm=error", "text");
  const log = lineLogger();
  log("llm ext_proc: a plain note");
  log("llm ext_proc: upstream failed");
  log("sluice: 3 resources");
  assert.deepEqual(lines, ["llm ext_proc: upstream failed", "sluice: 3 resources"]);
});

test("a line written while a request is handled carries its trace id, or a request id without one", async () => {
  const lines = capture("info,authz=debug", "json");
  const handler = withRequestContext("ext_authz", async () => {
    await Promise.resolve();
    requestDebug("authz", { policy: "p" }, "ext_authz: decided");
    return new Uint8Array();
  });
  const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
  await handler(new Uint8Array(), { traceparent: `00-${traceId}-00f067aa0ba902b7-01` });
  await handler(new Uint8Array(), {});
  requestDebug("authz", {}, "outside any request");
  const [traced, untraced, outside] = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
  assert.equal(traced?.["trace_id"], traceId);
  assert.equal(traced?.["span_id"], "00f067aa0ba902b7");
  assert.match(String(untraced?.["request_id"]), /^[0-9a-z]+-[0-9a-z]+$/);
  assert.equal(untraced?.["trace_id"], undefined);
  assert.equal(outside?.["request_id"], undefined);
  assert.equal(outside?.["trace_id"], undefined);
});
