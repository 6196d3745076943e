// Sluice's FailOpen buffer (src/extproc/buffer-hold.ts) with a recording stream: the headers' answer is kept back
// until the body ends or maxBytes is reached, what is held goes out as one streamed chunk, later chunks as they come,
// trailers are answered; every answer's bytes are what protobuf-es writes. Through Envoy:
// test/e2e/backend-buffer-fail-open.test.ts.

import assert from "node:assert/strict";
import { test } from "node:test";
import { serveHold } from "../../src/extproc/buffer-hold.js";
import { checkWrite, type ExtProcRequest, type Reply, writeReply } from "../../src/extproc/llm/wire.js";

function stream(limit: { request?: number; response?: number }) {
  const out: Reply[] = [];
  let onData: (r: ExtProcRequest) => void = () => undefined;
  serveHold(
    {
      write: (r) => {
        checkWrite(r, writeReply(r));
        out.push(r);
      },
      end: () => undefined,
      on: ((event: string, f: (r: ExtProcRequest) => void) => {
        if (event === "data") onData = f;
      }) as never,
    },
    limit,
  );
  const send = (request: ExtProcRequest["request"]) => onData({ request, attributes: {} });
  const body = (text: string, endOfStream = false) => ({ body: Buffer.from(text), endOfStream });
  const shown = () =>
    out.map((r) =>
      r.phase === "immediate"
        ? "immediate"
        : `${r.phase}${r.body !== undefined ? `:${Buffer.from(r.body).toString()}${r.streamed?.endOfStream ? "!" : ""}` : ""}`,
    );
  return { send, body, shown };
}

test("a body within maxBytes: the headers are answered when it ends, with the whole body in one chunk", () => {
  const s = stream({ request: 10 });
  s.send({ case: "requestHeaders", value: { endOfStream: false } });
  s.send({ case: "requestBody", value: s.body("abc") });
  s.send({ case: "requestBody", value: s.body("def") });
  assert.deepEqual(s.shown(), [], "nothing answered while the body is held");
  s.send({ case: "requestBody", value: s.body("", true) });
  assert.deepEqual(s.shown(), ["requestHeaders", "requestBody:abcdef!"]);
});

test("a larger body: released once maxBytes is reached, later chunks pass as they come", () => {
  const s = stream({ request: 4, response: 100 });
  s.send({ case: "requestHeaders", value: { endOfStream: false } });
  s.send({ case: "requestBody", value: s.body("abc") });
  s.send({ case: "requestBody", value: s.body("defg") });
  s.send({ case: "requestBody", value: s.body("h", true) });
  // The response: no body to hold; then one with trailers.
  s.send({ case: "responseHeaders", value: { endOfStream: false } });
  s.send({ case: "responseBody", value: s.body("xy") });
  s.send({ case: "responseTrailers", value: {} });
  assert.deepEqual(s.shown(), [
    "requestHeaders",
    "requestBody:abcdefg",
    "requestBody:h!",
    "responseHeaders",
    "responseBody:xy",
    "responseTrailers",
  ]);
});

test("a message without a body is answered at once", () => {
  const s = stream({ request: 4 });
  s.send({ case: "requestHeaders", value: { endOfStream: true } });
  assert.deepEqual(s.shown(), ["requestHeaders"]);
});
