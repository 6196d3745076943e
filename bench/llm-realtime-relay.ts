// What sending a Realtime route through Sluice's relay costs per provider event, against the same session Envoy passes
// straight through, measured alternately in one run: a route with a `tokens` limit (relayed: frames parsed and
// re-framed, each response.done counted and debited) and one without (a websocket Envoy passes). Each response is 200
// text deltas, a text done and a response.done (usage reported) from the fake Realtime provider; Node's WebSocket
// client asks for responses one after the other. CPU from /proc (10 ms ticks). Run: node dist/bench/llm-realtime-relay.js

import { realtimeTokensLimitYaml, startFakeRealtime } from "../test/helpers/fake-realtime.js";
import { startLlmEnv } from "../test/helpers/llm-env.js";
import { openRealtime, untilEvent } from "../test/helpers/realtime-client.js";
import { cpuMs } from "./proc.js";

const DELTAS = 200;
const RESPONSES = Number(process.argv[2] ?? 40);

const rt = await startFakeRealtime({ name: "rt", apiKey: "sk-provider", deltas: Array(DELTAS).fill("word ") });
const env = await startLlmEnv(realtimeTokensLimitYaml(rt, 1_000_000_000), "/limited/v1/realtime");

async function session(prefix: string, responses: number): Promise<void> {
  const { ws, next } = await openRealtime(env.port, `/${prefix}/v1/realtime`, "client-key");
  await next();
  for (let i = 0; i < responses; i++) {
    ws.send(JSON.stringify({ type: "response.create" }));
    await untilEvent(next, "response.done");
  }
  ws.close();
}

try {
  await session("direct", 5);
  await session("limited", 5);
  const events = RESPONSES * (DELTAS + 2);
  for (const prefix of ["direct", "limited", "direct", "limited"]) {
    const e0 = cpuMs(env.envoy.process.child.pid);
    const s0 = cpuMs(env.sluice.child.pid);
    const t0 = performance.now();
    await session(prefix, RESPONSES);
    const ms = performance.now() - t0;
    const envoyUs = ((cpuMs(env.envoy.process.child.pid) - e0) * 1000) / events;
    const sluiceUs = ((cpuMs(env.sluice.child.pid) - s0) * 1000) / events;
    console.log(
      `${prefix.padEnd(8)} ${events} events  envoy ${envoyUs.toFixed(1)} µs/event  sluice ${sluiceUs.toFixed(1)} µs/event  ${(ms / RESPONSES).toFixed(1)} ms/response`,
    );
  }
} finally {
  await env.stop();
  await rt.close();
}
