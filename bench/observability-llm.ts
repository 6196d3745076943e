// Sluice CPU per LLM request with observability off and on, without Envoy, HTTP/2 or the load generator sharing the
// machine's noise: the LLM ext_proc's Process handler (as src/cli/server.ts installs it, wrapped in a request context
// when that is wanted) driven through one whole buffered exchange (request headers, the 1 KB chat-completions body
// translated to Anthropic Messages, response headers, the provider's answer with its usage, end) per request. Each
// setting runs in a process of its own, as `sluice serve` would (AsyncLocalStorage, once entered, costs every promise
// of the process); their rounds alternate so a busy host slows them alike. Prints CPU µs per request, best round.
//
// `--service authz`: the same for the ext_authz gRPC Check handler (allow-all policy, a serialized CheckRequest),
// wrapped as src/cli/server.ts wraps unary handlers.
//
//   node dist/bench/observability-llm.js [--requests 20000] [--rounds 5] [--service llm|authz]

import { spawnSync } from "node:child_process";
import { EventEmitter } from "node:events";
import { availableParallelism, loadavg } from "node:os";
import { parseArgs } from "node:util";
import { create, type MessageInitShape, toBinary } from "@bufbuild/protobuf";
import { loadAndTranslate } from "../src/cli/load.js";
import { EMPTY_AUTHORIZATION } from "../src/extauthz/authorization.js";
import { type ExtAuthzPolicy, extAuthzUnaryHandlers, POLICY_CONTEXT_KEY } from "../src/extauthz/server.js";
import { LlmExtProcService } from "../src/extproc/llm/service.js";
import { Authorization, CheckRequestSchema } from "../src/gen/envoy/service/auth/v3/external_auth_pb.js";
import { ProcessingRequestSchema } from "../src/gen/envoy/service/ext_proc/v3/external_processor_pb.js";
import type { BidiCall } from "../src/grpc/unary-server.js";
import { withRequestContext, withStreamContext } from "../src/observability/context.js";
import { configureLogging, parseLevelSpec } from "../src/observability/log.js";
import { setRequestMetrics } from "../src/observability/metrics.js";
import { requestContextWanted } from "../src/observability/options.js";
import { tempConfigDir } from "../test/helpers/processes.js";

const { values } = parseArgs({
  options: {
    requests: { type: "string", default: "20000" },
    rounds: { type: "string", default: "5" },
    child: { type: "string" },
    service: { type: "string", default: "llm" },
  },
});
const REQUESTS = Number(values.requests);

/** What `bench/llm --observability on|off` gives `sluice serve`. */
const SETTINGS: Readonly<
  Record<string, { readonly metrics: boolean; readonly level: string; readonly context?: boolean }>
> = {
  off: { metrics: false, level: "warn,sluice=info" },
  on: { metrics: true, level: "info" },
  ...(process.env["BENCH_VARIANTS"] !== undefined
    ? {
        "metrics, no context": { metrics: true, level: "info", context: false },
        "context, no metrics": { metrics: false, level: "info", context: true },
      }
    : {}),
};

async function child(setting: string): Promise<void> {
  const s = SETTINGS[setting];
  if (s === undefined) throw new Error(`unknown setting ${setting}`);
  const levels = parseLevelSpec(s.level);
  if (typeof levels === "string") throw new Error(levels);
  configureLogging({ levels, format: "text", write: () => {} });
  setRequestMetrics(s.metrics);

  if (values.service === "authz") {
    await authzChild();
    return;
  }
  const cfg = tempConfigDir();
  cfg.write(
    "all.yaml",
    `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: { name: gw, namespace: default }
spec:
  gatewayClassName: sluice
  listeners: [{ name: http, protocol: HTTP, port: 8080 }]
---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: claude, namespace: default }
spec:
  ai: { provider: { providerD: {}, host: 127.0.0.1, port: 9 } }
  policies: { auth: { key: sk-bench } }
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: llm, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules: [{ backendRefs: [{ group: sluice.dev, kind: GwBackend, name: claude }] }]
`,
  );
  const { result } = await loadAndTranslate([cfg.dir]);
  cfg.cleanup();
  const service = new LlmExtProcService();
  service.update(result);
  const entry = [...result.llm.routes.values()][0];
  if (entry === undefined) throw new Error("no LLM route");
  const plain = service.bidi.get("/envoy.service.ext_proc.v3.ExternalProcessor/Process");
  if (plain === undefined) throw new Error("no Process handler");
  const handler = (s.context ?? requestContextWanted()) ? withStreamContext("llm ext_proc", plain) : plain;

  const te = new TextEncoder();
  const headers = (h: Record<string, string>) => ({
    headers: { headers: Object.entries(h).map(([key, v]) => ({ key, rawValue: te.encode(v) })) },
  });
  const msg = (request: NonNullable<MessageInitShape<typeof ProcessingRequestSchema>["request"]>) =>
    toBinary(ProcessingRequestSchema, create(ProcessingRequestSchema, { request }));
  const filler = "The quick brown fox jumps over the lazy dog. ".repeat(18);
  const messages = [
    msg({
      case: "requestHeaders",
      value: headers({
        ":path": "/v1/chat/completions",
        ":method": "POST",
        "content-type": "application/json",
        authorization: "Bearer client",
      }),
    }),
    msg({
      case: "requestBody",
      value: {
        endOfStream: true,
        body: te.encode(
          JSON.stringify({
            model: "claude-sonnet-4",
            max_tokens: 64,
            messages: [
              { role: "system", content: "You are a concise assistant." },
              { role: "user", content: `Summarize: ${filler}` },
            ],
          }),
        ),
      },
    }),
    msg({ case: "responseHeaders", value: headers({ ":status": "200", "content-type": "application/json" }) }),
    msg({
      case: "responseBody",
      value: {
        endOfStream: true,
        body: te.encode(
          JSON.stringify({
            id: "msg_1",
            type: "message",
            role: "assistant",
            model: "claude-sonnet-4",
            content: [{ type: "text", text: `Hello from the fake: ${filler}` }],
            stop_reason: "end_turn",
            stop_sequence: null,
            usage: { input_tokens: 210, output_tokens: 180 },
          }),
        ),
      },
    }),
  ];

  /** A Process call as the HTTP/2 server hands it over; resolves when the service has ended its side. */
  const exchange = () =>
    new Promise<number>((resolve) => {
      const call = new EventEmitter() as EventEmitter & BidiCall;
      let written = 0;
      Object.assign(call, {
        headers: { "x-sluice-llm-entry": entry },
        write: () => {
          written++;
        },
        end: () => resolve(written),
      });
      handler(call);
      for (const m of messages) call.emit("data", m);
      call.emit("end");
    });
  if ((await exchange()) !== 4) throw new Error("the exchange did not answer its four messages");
  for (let i = 0; i < REQUESTS / 4; i++) await exchange();
  const t0 = process.cpuUsage();
  for (let i = 0; i < REQUESTS; i++) await exchange();
  const d = process.cpuUsage(t0);
  if (process.env["BENCH_HEAP"] !== undefined) {
    (globalThis as { gc?: () => void }).gc?.();
    process.stderr.write(`heap used after ${REQUESTS}: ${(process.memoryUsage().heapUsed / 1e6).toFixed(1)} MB\n`);
  }
  process.stdout.write(`${(d.user + d.system) / REQUESTS}\n`);
}

/** The ext_authz Check handler per request, as `sluice serve` installs it. */
async function authzChild(): Promise<void> {
  const table = new Map<string, ExtAuthzPolicy>([["p-bench", { authorization: EMPTY_AUTHORIZATION, jwt: false }]]);
  const plain = extAuthzUnaryHandlers({ policies: () => table }).get(`/${Authorization.typeName}/Check`);
  if (plain === undefined) throw new Error("no Check handler");
  const check = requestContextWanted() ? withRequestContext("ext_authz", plain) : plain;
  const bytes = toBinary(
    CheckRequestSchema,
    create(CheckRequestSchema, {
      attributes: {
        request: {
          http: {
            method: "GET",
            path: "/items?internal=true",
            host: "example.com",
            headers: { "user-agent": "bench", accept: "*/*", "x-request-id": "0d1c2b3a" },
          },
        },
        contextExtensions: { [POLICY_CONTEXT_KEY]: "p-bench" },
      },
    }),
  );
  const headers = { "content-type": "application/grpc" };
  for (let i = 0; i < REQUESTS / 4; i++) await check(bytes, headers);
  const t0 = process.cpuUsage();
  for (let i = 0; i < REQUESTS; i++) await check(bytes, headers);
  const d = process.cpuUsage(t0);
  process.stdout.write(`${(d.user + d.system) / REQUESTS}\n`);
}

if (values.child !== undefined) {
  await child(values.child);
} else {
  const best: Record<string, number> = {};
  for (let round = 0; round < Number(values.rounds); round++) {
    for (const setting of Object.keys(SETTINGS)) {
      const r = spawnSync(process.execPath, [import.meta.filename, "--child", setting, "--requests", values.requests], {
        encoding: "utf8",
        stdio: ["ignore", "pipe", "inherit"],
      });
      const us = Number(r.stdout.trim());
      if (r.status !== 0 || !(us > 0)) throw new Error(`child ${setting} failed (${r.status}): ${r.stdout}`);
      best[setting] = Math.min(best[setting] ?? Number.POSITIVE_INFINITY, us);
    }
  }
  const [load1] = loadavg();
  const off = best["off"] ?? 0;
  const on = best["on"] ?? 0;
  console.log(
    `load average ${load1?.toFixed(2)} on ${availableParallelism()} cores; ${REQUESTS} ${values.service === "authz" ? "checks" : "buffered chat→messages exchanges"} per process, best of ${values.rounds} alternating rounds`,
  );
  for (const [k, v] of Object.entries(best)) if (k !== "on" && k !== "off") console.log(`  ${k}: ${v.toFixed(1)} µs`);
  const what = values.service === "authz" ? "ext_authz Check" : "LLM ext_proc";
  console.log(`  ${what}, observability off: ${off.toFixed(1)} µs CPU per request`);
  console.log(
    `  ${what}, observability on:  ${on.toFixed(1)} µs CPU per request (+${(on - off).toFixed(1)} µs, ${((on / off - 1) * 100).toFixed(1)} %)`,
  );
}
