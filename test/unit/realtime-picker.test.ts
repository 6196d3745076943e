// The Realtime relay's call to an InferencePool's endpoint picker (extproc/llm/realtime/picker.ts), against a gRPC
// ext_proc server answering as the extension's pickers can: what the picker is shown (the session's model in a body,
// the forwarded headers), the choice read from `envoy.lb` (the first of a list, IPv6 too), a host name or a port out of
// range not taken, an immediate response passed on, a picker endpoint that fails skipped for the next.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { create } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import { EndpointPickers } from "../../src/extproc/llm/realtime/picker.js";
import {
  ExternalProcessor,
  type ProcessingRequest,
  ProcessingResponseSchema,
} from "../../src/gen/envoy/service/ext_proc/v3/external_processor_pb.js";
import { addGrpcService } from "../../src/grpc/service.js";
import type { InferencePoolIR } from "../../src/translate/ir.js";
import { freePort } from "../helpers/net.js";

/** What the picker answers for a model: an endpoint list, or an immediate response's status and body. */
let answer: (model: string) => { endpoint: string } | { status: number; body: string } = () => ({
  endpoint: "10.0.0.1:8000",
});
const seen: { headers: Record<string, string>; body: unknown }[] = [];
let server: grpc.Server;
let port = 0;

before(async () => {
  server = new grpc.Server();
  addGrpcService(server, ExternalProcessor, {
    process(call) {
      const headers: Record<string, string> = {};
      call.on("data", (req: ProcessingRequest) => {
        const r = req.request;
        if (r.case === "requestHeaders") {
          for (const h of r.value.headers?.headers ?? []) headers[h.key] = Buffer.from(h.rawValue).toString();
          return;
        }
        if (r.case !== "requestBody" || !r.value.endOfStream) return;
        const body = JSON.parse(Buffer.from(r.value.body).toString()) as { model: string };
        seen.push({ headers, body });
        const a = answer(body.model);
        call.write(
          "endpoint" in a
            ? create(ProcessingResponseSchema, {
                response: { case: "requestHeaders", value: {} },
                dynamicMetadata: { "envoy.lb": { "x-gateway-destination-endpoint": a.endpoint } },
              })
            : create(ProcessingResponseSchema, {
                response: {
                  case: "immediateResponse",
                  value: { status: { code: a.status }, body: new TextEncoder().encode(a.body) },
                },
              }),
        );
      });
      call.on("end", () => call.end());
      call.on("error", () => undefined);
    },
  });
  port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
  );
});
after(() => server.forceShutdown());

const pool = (ports: number[], failOpen = false, fallback?: string[]): InferencePoolIR => ({
  name: "ai/llama",
  picker: {
    cluster: "inferencepool/ai/llama/picker",
    service: "ai/llama-epp",
    endpoints: ports.map((p) => ({ address: "127.0.0.1", port: p, ready: true })),
  },
  failOpen,
  ...(fallback !== undefined ? { fallback } : {}),
});

test("the picker is shown the session's model and headers; its choice is read from envoy.lb", async () => {
  const pickers = new EndpointPickers();
  try {
    const r = await pickers.pick(pool([port]), {
      authority: "llama.ai:8000",
      model: "gpt-realtime",
      headers: { "user-agent": "ua" },
    });
    assert.deepEqual(r, { endpoint: { address: "10.0.0.1", port: 8000 } });
    const last = seen.at(-1);
    assert.deepEqual(last?.body, { model: "gpt-realtime", prompt: "" });
    assert.equal(last?.headers[":authority"], "llama.ai:8000");
    assert.equal(last?.headers["user-agent"], "ua");
    assert.equal(last?.headers["content-type"], "application/json");
  } finally {
    pickers.close();
  }
});

test("a list: its first endpoint; IPv6 in brackets; a host name or a bad port is no choice", async () => {
  const pickers = new EndpointPickers();
  const ask = (endpoint: string) => {
    answer = () => ({ endpoint });
    return pickers.pick(pool([port]), { authority: "a", model: "m", headers: {} });
  };
  try {
    assert.deepEqual(await ask("10.0.0.2:8000, 10.0.0.3:8000"), { endpoint: { address: "10.0.0.2", port: 8000 } });
    assert.deepEqual(await ask("[fd00::7]:8000"), { endpoint: { address: "fd00::7", port: 8000 } });
    // Named nothing usable: the exchange ends without a choice (the server ends the stream once the client does not).
    answer = () => ({ endpoint: "evil.example.com:80" });
    const bad = await Promise.race([
      pickers.pick(pool([port]), { authority: "a", model: "m", headers: {} }),
      new Promise((r) => setTimeout(() => r("pending"), 300)),
    ]);
    assert.equal(bad, "pending");
  } finally {
    pickers.close();
    answer = () => ({ endpoint: "10.0.0.1:8000" });
  }
});

test("the picker's immediate response is the client's answer", async () => {
  const pickers = new EndpointPickers();
  answer = () => ({ status: 429, body: "too many requests for m" });
  try {
    assert.deepEqual(await pickers.pick(pool([port]), { authority: "a", model: "m", headers: {} }), {
      status: 429,
      message: "too many requests for m",
    });
  } finally {
    pickers.close();
    answer = () => ({ endpoint: "10.0.0.1:8000" });
  }
});

test("a picker endpoint that fails is skipped for the next; none answering is a 503 naming the pool", async () => {
  const pickers = new EndpointPickers();
  const dead = await freePort();
  try {
    const r = await pickers.pick(pool([dead, port]), { authority: "a", model: "m", headers: {} });
    assert.deepEqual(r, { endpoint: { address: "10.0.0.1", port: 8000 } });
    const none = await pickers.pick(pool([dead], true), { authority: "a", model: "m", headers: {} });
    assert.ok("status" in none);
    assert.equal(none.status, 503);
    assert.match(
      none.message,
      /^InferencePool ai\/llama: its endpoint picker ai\/llama-epp did not choose: .*FailOpen/,
    );
    const empty = await pickers.pick(pool([]), { authority: "a", model: "m", headers: {} });
    assert.deepEqual(empty, {
      status: 503,
      message: "InferencePool ai/llama: its endpoint picker ai/llama-epp has no ready endpoint",
    });
  } finally {
    pickers.close();
  }
});

test("FailOpen: a picker that does not choose sends the session to the pool's ready Pods in turn", async () => {
  const pickers = new EndpointPickers();
  const dead = await freePort();
  const ask = (p: InferencePoolIR) => pickers.pick(p, { authority: "a", model: "m", headers: {} });
  try {
    const pods = ["10.0.1.1:8000", "[fd00::5]:8000"];
    assert.deepEqual(await ask(pool([dead], true, pods)), { endpoint: { address: "10.0.1.1", port: 8000 } });
    assert.deepEqual(await ask(pool([], true, pods)), { endpoint: { address: "fd00::5", port: 8000 } });
    assert.deepEqual(await ask(pool([dead], true, pods)), { endpoint: { address: "10.0.1.1", port: 8000 } });
    // The picker's answer wins; FailClose never falls back; no ready Pod is the 503 naming the pool.
    assert.deepEqual(await ask(pool([port], true, pods)), { endpoint: { address: "10.0.0.1", port: 8000 } });
    assert.ok("status" in (await ask(pool([dead], false, pods))));
    assert.deepEqual(await ask(pool([], true, [])), {
      status: 503,
      message:
        "InferencePool ai/llama: its endpoint picker ai/llama-epp has no ready endpoint (FailOpen: the pool has no ready Pod to go on to)",
    });
  } finally {
    pickers.close();
  }
});
