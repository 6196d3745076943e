// SSE parser, AWS event-stream codec and SigV4, checked against independent implementations and published vectors.
import assert from "node:assert/strict";
import { test } from "node:test";
import { Sha256 } from "@aws-crypto/sha256-js";
import { EventStreamCodec } from "@smithy/eventstream-codec";
import { SignatureV4 } from "@smithy/signature-v4";
import { fromUtf8, toUtf8 } from "@smithy/util-utf8";
import { EventStreamDecoder, encodeEventStreamMessage, encodeJsonEvent } from "../../src/llm/codec/eventstream.js";
import { signSigV4 } from "../../src/llm/codec/sigv4.js";
import { SseParser, serializeSse } from "../../src/llm/codec/sse.js";
import { upstreamTarget } from "../../src/llm/providers.js";

const te = new TextEncoder();

function parseAll(bytes: Uint8Array, sizes: number[]): ReturnType<SseParser["end"]> {
  const p = new SseParser();
  const out = [];
  let i = 0;
  let k = 0;
  while (i < bytes.length) {
    const n = sizes[k++ % sizes.length]!;
    out.push(...p.push(bytes.subarray(i, i + n)));
    i += n;
  }
  out.push(...p.end());
  return out;
}

test("SSE: spec cases (CRLF/CR/LF, multi-line data, comments, BOM, no space after colon, id, [DONE])", () => {
  const text =
    "\uFEFF: comment\r\nevent: a\r\ndata: one\r\ndata:two\r\n\r\ndata: x\rid: 7\r\rdata\n\nevent: empty-data-ignored\n\ndata: [DONE]\n\ndata: tail-without-blank-line";
  const evs = parseAll(te.encode(text), [text.length * 3]);
  assert.deepEqual(evs, [
    { event: "a", data: "one\ntwo" },
    { data: "x", id: "7" },
    { data: "", id: "7" },
    { data: "[DONE]", id: "7" },
    { data: "tail-without-blank-line", id: "7" },
  ]);
});

test("SSE: any chunking (including inside CRLF and inside UTF-8 sequences) gives the same events", () => {
  const body =
    'event: x\r\ndata: {"t":"héllo ☀️ 𝄞"}\r\n\r\n: ping\n\ndata: a\ndata: b\n\n' +
    serializeSse({ event: "multi", data: "line1\nline2\r\nline3" });
  const bytes = te.encode(body);
  const whole = parseAll(bytes, [bytes.length]);
  assert.equal(whole.length, 3);
  assert.equal(whole[2]!.data, "line1\nline2\nline3");
  for (let size = 1; size <= 9; size++) assert.deepEqual(parseAll(bytes, [size]), whole, `chunk size ${size}`);
  // seeded pseudo-random splits
  let seed = 42;
  for (let r = 0; r < 200; r++) {
    const sizes = Array.from({ length: 8 }, () => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return 1 + (seed % 17);
    });
    assert.deepEqual(parseAll(bytes, sizes), whole);
  }
});

const smithyCodec = new EventStreamCodec(toUtf8, fromUtf8);

test("event-stream: our frames decode with @smithy/eventstream-codec and vice versa", () => {
  const ours = encodeJsonEvent("contentBlockDelta", { contentBlockIndex: 0, delta: { text: "hi ☀️" } });
  const decoded = smithyCodec.decode(ours);
  assert.equal(decoded.headers[":event-type"]?.value, "contentBlockDelta");
  assert.equal(decoded.headers[":message-type"]?.value, "event");
  assert.deepEqual(JSON.parse(toUtf8(decoded.body)), { contentBlockIndex: 0, delta: { text: "hi ☀️" } });

  const theirs = smithyCodec.encode({
    headers: {
      ":event-type": { type: "string", value: "metadata" },
      flag: { type: "boolean", value: false },
      n: { type: "integer", value: -5 },
      ts: { type: "timestamp", value: new Date(1700000000000) },
      raw: { type: "binary", value: Uint8Array.of(1, 2, 3) },
    },
    body: fromUtf8('{"usage":{"inputTokens":1}}'),
  });
  const r = new EventStreamDecoder().push(theirs);
  assert.equal(r.error, undefined);
  assert.equal(r.messages.length, 1);
  const h = r.messages[0]!.headers;
  assert.equal(h[":event-type"], "metadata");
  assert.equal(h.flag, false);
  assert.equal(h.n, -5);
  assert.deepEqual(h.ts, new Date(1700000000000));
  assert.deepEqual([...(h.raw as Uint8Array)], [1, 2, 3]);
  // and our encoder reproduces smithy's bytes for the same message
  const again = encodeEventStreamMessage({ headers: { ":event-type": "x" }, payload: fromUtf8("{}") });
  const smithyAgain = smithyCodec.encode({
    headers: { ":event-type": { type: "string", value: "x" } },
    body: fromUtf8("{}"),
  });
  assert.deepEqual([...again], [...smithyAgain]);
});

test("event-stream: byte-at-a-time decoding, and CRC corruption is detected, not translated", () => {
  const frames = [
    encodeJsonEvent("messageStart", { role: "assistant" }),
    encodeJsonEvent("messageStop", { stopReason: "end_turn" }),
  ];
  const all = new Uint8Array(frames[0]!.length + frames[1]!.length);
  all.set(frames[0]!, 0);
  all.set(frames[1]!, frames[0]!.length);
  const d = new EventStreamDecoder();
  const got = [];
  for (let i = 0; i < all.length; i++) got.push(...d.push(all.subarray(i, i + 1)).messages);
  assert.equal(got.length, 2);
  assert.equal(d.end(), undefined);

  const badPayload = frames[0]!.slice();
  badPayload[badPayload.length - 6]! ^= 0xff;
  assert.match(new EventStreamDecoder().push(badPayload).error ?? "", /message CRC/);
  const badPrelude = frames[0]!.slice();
  badPrelude[3]! ^= 0x01;
  assert.match(new EventStreamDecoder().push(badPrelude).error ?? "", /prelude CRC/);
  const truncated = new EventStreamDecoder();
  truncated.push(frames[0]!.subarray(0, 20));
  assert.match(truncated.end() ?? "", /truncated/);
});

const EXAMPLE = {
  region: "us-east-1",
  service: "service",
  credentials: { accessKeyId: "AKIDEXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY" },
  date: new Date("2015-08-30T12:36:00Z"),
};

test("SigV4: AWS test-suite vectors (get-vanilla, get-vanilla-query-order-key-case)", () => {
  const a = signSigV4({ method: "GET", host: "example.amazonaws.com", path: "/", body: "" }, EXAMPLE);
  assert.equal(
    a.headers.authorization,
    "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
  );
  const b = signSigV4(
    { method: "GET", host: "example.amazonaws.com", path: "/", query: "Param2=value2&Param1=value1", body: "" },
    EXAMPLE,
  );
  assert.equal(b.signature, "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500");
});

test("SigV4: a Bedrock converse-stream request signs exactly as @smithy/signature-v4 does", async () => {
  const model = "anthropic.claude-3-haiku-20240307-v1:0";
  const target = upstreamTarget({ kind: "bedrock", region: "eu-west-3" }, "converse", model, true)!;
  assert.equal(target.path, "/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse-stream");
  const body = JSON.stringify({ messages: [{ role: "user", content: [{ text: "héllo" }] }] });
  const creds = {
    accessKeyId: "AKIAIOSFODNN7EXAMPLE",
    secretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    sessionToken: "tok+en/=",
  };
  const date = new Date("2025-01-02T03:04:05Z");
  const ours = signSigV4(
    { method: "POST", host: target.host, path: target.path, headers: target.headers, body },
    { region: "eu-west-3", service: "bedrock", credentials: creds, date, contentSha256Header: true },
  );
  const signer = new SignatureV4({ credentials: creds, region: "eu-west-3", service: "bedrock", sha256: Sha256 });
  const signed = await signer.sign(
    {
      method: "POST",
      protocol: "https:",
      hostname: target.host,
      path: target.path,
      headers: { ...target.headers, host: target.host },
      body,
    },
    { signingDate: date },
  );
  assert.equal(ours.headers.authorization, signed.headers.authorization);
  assert.equal(ours.headers["x-amz-security-token"], signed.headers["x-amz-security-token"]);
  assert.equal(ours.headers["x-amz-content-sha256"], signed.headers["x-amz-content-sha256"]);
});
