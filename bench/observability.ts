// What Sluice's request observability adds per request, measured in process where a loaded host's noise does not
// swamp a few percent: the ext_authz gRPC Check handler on a real serialized CheckRequest, and the LLM ext_proc's
// hooks on one request, each with request metrics off, on, and on inside a request context (context.ts), set against
// the handler alone. The end-to-end benches (bench/authz.ts, bench/llm.ts --observability on|off) measure the same
// through Envoy; on a busy machine their run-to-run spread is larger than the difference.
//
//   node dist/bench/observability.js [--iterations 200000]

import { availableParallelism, loadavg } from "node:os";
import { parseArgs } from "node:util";
import { create, toBinary } from "@bufbuild/protobuf";
import { EMPTY_AUTHORIZATION } from "../src/extauthz/authorization.js";
import { type ExtAuthzPolicy, extAuthzUnaryHandlers, POLICY_CONTEXT_KEY } from "../src/extauthz/server.js";
import { Authorization, CheckRequestSchema } from "../src/gen/envoy/service/auth/v3/external_auth_pb.js";
import { withRequestContext } from "../src/observability/context.js";
import { llmChunk, llmCompleted, llmStarted } from "../src/observability/llm.js";
import { configureLogging } from "../src/observability/log.js";
import { setRequestMetrics } from "../src/observability/metrics.js";

const { values } = parseArgs({ options: { iterations: { type: "string", default: "200000" } } });
const N = Number(values.iterations);
configureLogging({ levels: { level: "info", modules: new Map() }, format: "text", write: () => {} });

const table = new Map<string, ExtAuthzPolicy>([["p-bench", { authorization: EMPTY_AUTHORIZATION, jwt: false }]]);
const check = extAuthzUnaryHandlers({ policies: () => table }).get(`/${Authorization.typeName}/Check`);
if (check === undefined) throw new Error("no Check handler");
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

/**
 * Best time per call of each variant, their rounds interleaved (a busy host slows them alike): each variant's setup
 * runs before its round.
 */
async function interleaved(
  variants: readonly { readonly setup: () => void; readonly fn: () => Promise<unknown> }[],
): Promise<number[]> {
  const best = variants.map(() => Number.POSITIVE_INFINITY);
  for (const v of variants) {
    v.setup();
    for (let i = 0; i < N / 10; i++) await v.fn();
  }
  for (let round = 0; round < 5; round++) {
    for (const [k, v] of variants.entries()) {
      v.setup();
      const t = process.hrtime.bigint();
      for (let i = 0; i < N; i++) await v.fn();
      best[k] = Math.min(best[k] as number, Number(process.hrtime.bigint() - t) / N);
    }
  }
  return best;
}

function timeSync(fn: () => void): number {
  for (let i = 0; i < N / 10; i++) fn();
  let best = Number.POSITIVE_INFINITY;
  for (let round = 0; round < 3; round++) {
    const t = process.hrtime.bigint();
    for (let i = 0; i < N; i++) fn();
    best = Math.min(best, Number(process.hrtime.bigint() - t) / N);
  }
  return best;
}

const plain = () => check(bytes, headers);
// Before any request context: AsyncLocalStorage costs every promise once one was entered (Node 22's promise hooks).
const [off = 0, on = 0] = await interleaved([
  { setup: () => setRequestMetrics(false), fn: plain },
  { setup: () => setRequestMetrics(true), fn: plain },
]);
const wrapped = withRequestContext("ext_authz", check);
const [inContext = 0, offAfter = 0] = await interleaved([
  { setup: () => setRequestMetrics(true), fn: () => wrapped(bytes, headers) },
  { setup: () => setRequestMetrics(false), fn: plain },
]);

// One LLM request's hooks: started, a streamed chunk, completed with usage.
const state = {
  entry: { id: "llm-bench" },
  routeType: "Completions",
  body: { model: "gpt-4o-mini", stream: true },
  attempt: { provider: "openai" },
};
const usage = { inputTokens: 1000, outputTokens: 200 };
setRequestMetrics(true);
const llm = timeSync(() => {
  const s = { ...state };
  llmStarted(s);
  llmChunk(s);
  llmCompleted(s, usage, "gpt-4o-mini");
});

const [load1] = loadavg();
console.log(
  `load average ${load1?.toFixed(2)} on ${availableParallelism()} cores; ${N} iterations, best of 5 interleaved rounds`,
);
console.log("ext_authz Check (gRPC handler, allow-all policy)   ns/check   vs off");
const row = (label: string, ns: number) =>
  console.log(`  ${label.padEnd(48)} ${ns.toFixed(0).padStart(8)}  ${((ns / off - 1) * 100).toFixed(1).padStart(6)} %`);
row("request metrics off", off);
row("request metrics on", on);
row("on, in a request context (AsyncLocalStorage)", inContext);
row("off again, after a request context was used", offAfter);
console.log(`LLM hooks (started + first chunk + completed, 2 token types): ${llm.toFixed(0)} ns per request`);
