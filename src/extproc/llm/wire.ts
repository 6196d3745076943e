// The ext_proc messages of the LLM hot path, read and written directly on the wire.
//
// protobuf-es decodes and encodes by reflection: for the four or five messages of each LLM request that was about a
// third of the Sluice CPU per request (bench/llm.ts, profiled). The reader keeps only what the LLM service reads of a
// ProcessingRequest (the request oneof with headers, bodies and end of stream, and the attributes); the writer covers
// every field the service sets on a ProcessingResponse and refuses any other (a bug, caught by the tests), writing
// fields in field-number order as protobuf-es does, so its bytes equal toBinary()'s
// (test/unit/llm-wire.test.ts compares both, and `SLUICE_EXTPROC_WIRE_CHECK=1` makes the server compare every message).
//
// Field numbers (envoy.service.ext_proc.v3, envoy.config.core.v3, google.protobuf):
//   ProcessingRequest   2 request_headers, 3 response_headers (HttpHeaders), 4 request_body, 5 response_body
//                       (HttpBody), 6 request_trailers, 7 response_trailers, 8 metadata_context (Metadata),
//                       9 attributes (map<string, Struct>)
//   Metadata            1 filter_metadata (map<string, Struct>)
//   HttpHeaders         1 headers (HeaderMap), 3 end_of_stream          HttpBody   1 body, 2 end_of_stream
//   HeaderMap           1 headers (HeaderValue: 1 key, 2 value, 3 raw_value)
//   ProcessingResponse  1..6 headers/body/trailers responses, 7 immediate_response, 8 dynamic_metadata (Struct),
//                       9 mode_override (ProcessingMode)
//   HeadersResponse, BodyResponse   1 response (CommonResponse)
//   CommonResponse      1 status, 2 header_mutation, 3 body_mutation, 5 clear_route_cache
//   HeaderMutation      1 set_headers (HeaderValueOption: 1 header, 3 append_action, 4 keep_empty_value),
//                       2 remove_headers
//   BodyMutation        1 body, 2 clear_body (oneof)
//   ImmediateResponse   1 status (HttpStatus: 1 code), 2 headers (HeaderMutation), 3 body, 5 details
//   ProcessingMode      1..6 header and body send modes
//   Struct 1 fields (map<string, Value>); Value 1 null, 2 number, 3 string, 4 bool, 5 struct, 6 list; ListValue 1 values

import {
  create,
  fromBinary,
  type JsonObject,
  type JsonValue,
  type MessageInitShape,
  toBinary,
} from "@bufbuild/protobuf";
import { HeaderValueOption_HeaderAppendAction } from "../../gen/envoy/config/core/v3/base_pb.js";
import type {
  ProcessingMode_BodySendMode,
  ProcessingMode_HeaderSendMode,
} from "../../gen/envoy/extensions/filters/http/ext_proc/v3/processing_mode_pb.js";
import {
  CommonResponse_ResponseStatus,
  type HeaderMutationSchema,
  ProcessingRequestSchema,
  type ProcessingResponse,
  ProcessingResponseSchema,
} from "../../gen/envoy/service/ext_proc/v3/external_processor_pb.js";

/** A header as Envoy sends it: `raw_value` (bytes) when Envoy is configured so, `value` otherwise. */
export interface ExtProcHeader {
  readonly key: string;
  readonly value: string;
  readonly rawValue: Uint8Array;
}

export interface ExtProcHeaders {
  readonly headers?: { readonly headers: readonly ExtProcHeader[] } | undefined;
  readonly endOfStream: boolean;
}

export interface ExtProcBody {
  readonly body: Uint8Array;
  readonly endOfStream: boolean;
}

/** What the LLM service reads of a ProcessingRequest; protobuf-es's ProcessingRequest is one too. */
export interface ExtProcRequest {
  readonly request:
    | { readonly case: "requestHeaders" | "responseHeaders"; readonly value: ExtProcHeaders }
    | { readonly case: "requestBody" | "responseBody"; readonly value: ExtProcBody }
    | { readonly case: "requestTrailers" | "responseTrailers"; readonly value: unknown }
    | { readonly case: undefined; readonly value?: undefined };
  readonly attributes: { readonly [namespace: string]: JsonObject };
  /** The dynamic metadata of the namespaces the route forwards (the identity of authenticated requests). */
  readonly metadataContext?: { readonly filterMetadata: { readonly [namespace: string]: JsonObject } } | undefined;
}

// ---- reading ----

class Reader {
  pos = 0;
  readonly buf: Buffer;
  constructor(bytes: Uint8Array) {
    this.buf = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  varint(): number {
    let result = 0;
    for (let shift = 0; shift < 64; shift += 7) {
      const b = this.buf[this.pos++];
      if (b === undefined) throw new Error("truncated varint");
      result += (b & 0x7f) * 2 ** shift;
      if ((b & 0x80) === 0) return result;
    }
    throw new Error("varint too long");
  }

  /** The end of the length-delimited field at the cursor, which is left at its start. */
  end(): number {
    const n = this.varint();
    const end = this.pos + n;
    if (end > this.buf.byteLength) throw new Error("truncated field");
    return end;
  }

  bytes(): Uint8Array {
    const end = this.end();
    const v = this.buf.subarray(this.pos, end);
    this.pos = end;
    return v;
  }

  string(): string {
    const end = this.end();
    const v = this.buf.toString("utf8", this.pos, end);
    this.pos = end;
    return v;
  }

  double(): number {
    if (this.pos + 8 > this.buf.byteLength) throw new Error("truncated double");
    const v = this.buf.readDoubleLE(this.pos);
    this.pos += 8;
    return v;
  }

  skip(wireType: number): void {
    if (wireType === 0) this.varint();
    else if (wireType === 2) this.pos = this.end();
    else if (wireType === 1) this.pos += 8;
    else if (wireType === 5) this.pos += 4;
    else throw new Error(`unsupported wire type ${wireType}`);
    if (this.pos > this.buf.byteLength) throw new Error("truncated field");
  }
}

const EMPTY: Uint8Array = new Uint8Array(0);

function readHeaderValue(r: Reader, end: number): ExtProcHeader {
  let key = "";
  let value = "";
  let rawValue = EMPTY;
  while (r.pos < end) {
    const tag = r.varint();
    const field = tag >>> 3;
    if (field === 1 && (tag & 7) === 2) key = r.string();
    else if (field === 2 && (tag & 7) === 2) value = r.string();
    else if (field === 3 && (tag & 7) === 2) rawValue = r.bytes();
    else r.skip(tag & 7);
  }
  return { key, value, rawValue };
}

function readHeaders(r: Reader, end: number): ExtProcHeaders {
  let headers: ExtProcHeader[] | undefined;
  let endOfStream = false;
  while (r.pos < end) {
    const tag = r.varint();
    const field = tag >>> 3;
    if (field === 1 && (tag & 7) === 2) {
      const mapEnd = r.end();
      headers ??= [];
      while (r.pos < mapEnd) {
        const t = r.varint();
        if (t >>> 3 === 1 && (t & 7) === 2) headers.push(readHeaderValue(r, r.end()));
        else r.skip(t & 7);
      }
    } else if (field === 3 && (tag & 7) === 0) endOfStream = r.varint() !== 0;
    else r.skip(tag & 7);
  }
  return { ...(headers !== undefined ? { headers: { headers } } : {}), endOfStream };
}

function readBody(r: Reader, end: number): ExtProcBody {
  let body = EMPTY;
  let endOfStream = false;
  while (r.pos < end) {
    const tag = r.varint();
    const field = tag >>> 3;
    if (field === 1 && (tag & 7) === 2) body = r.bytes();
    else if (field === 2 && (tag & 7) === 0) endOfStream = r.varint() !== 0;
    else r.skip(tag & 7);
  }
  return { body, endOfStream };
}

function readValue(r: Reader, end: number): JsonValue {
  let v: JsonValue = null;
  while (r.pos < end) {
    const tag = r.varint();
    const field = tag >>> 3;
    if (field === 1 && (tag & 7) === 0) {
      r.varint();
      v = null;
    } else if (field === 2 && (tag & 7) === 1) v = r.double();
    else if (field === 3 && (tag & 7) === 2) v = r.string();
    else if (field === 4 && (tag & 7) === 0) v = r.varint() !== 0;
    else if (field === 5 && (tag & 7) === 2) v = readStruct(r, r.end());
    else if (field === 6 && (tag & 7) === 2) {
      const listEnd = r.end();
      const list: JsonValue[] = [];
      while (r.pos < listEnd) {
        const t = r.varint();
        if (t >>> 3 === 1 && (t & 7) === 2) list.push(readValue(r, r.end()));
        else r.skip(t & 7);
      }
      v = list;
    } else r.skip(tag & 7);
  }
  return v;
}

function readStruct(r: Reader, end: number): JsonObject {
  const out: JsonObject = {};
  while (r.pos < end) {
    const tag = r.varint();
    if (tag >>> 3 === 1 && (tag & 7) === 2) readMapEntry(r, r.end(), null, readValue, out);
    else r.skip(tag & 7);
  }
  return out;
}

/** A map entry (1 key string, 2 value message, read by `value`) ending at `end`, stored into `into`. */
function readMapEntry<T>(
  r: Reader,
  end: number,
  absent: T,
  value: (r: Reader, end: number) => T,
  into: Record<string, T>,
): void {
  let key = "";
  let v = absent;
  while (r.pos < end) {
    const t = r.varint();
    if (t >>> 3 === 1 && (t & 7) === 2) key = r.string();
    else if (t >>> 3 === 2 && (t & 7) === 2) v = value(r, r.end());
    else r.skip(t & 7);
  }
  into[key] = v;
}

const HEADER_CASES = { 2: "requestHeaders", 3: "responseHeaders" } as const;
const BODY_CASES = { 4: "requestBody", 5: "responseBody" } as const;
const TRAILER_CASES = { 6: "requestTrailers", 7: "responseTrailers" } as const;

/** Reads a ProcessingRequest; throws on malformed bytes. */
export function readProcessingRequest(bytes: Uint8Array): ExtProcRequest {
  const r = new Reader(bytes);
  let request: ExtProcRequest["request"] = { case: undefined };
  const attributes: { [namespace: string]: JsonObject } = {};
  let filterMetadata: { [namespace: string]: JsonObject } | undefined;
  while (r.pos < bytes.byteLength) {
    const tag = r.varint();
    const field = tag >>> 3;
    if ((tag & 7) !== 2) {
      r.skip(tag & 7);
      continue;
    }
    if (field === 2 || field === 3) request = { case: HEADER_CASES[field], value: readHeaders(r, r.end()) };
    else if (field === 4 || field === 5) request = { case: BODY_CASES[field], value: readBody(r, r.end()) };
    else if (field === 6 || field === 7) {
      r.pos = r.end();
      request = { case: TRAILER_CASES[field], value: {} };
    } else if (field === 9) readMapEntry<JsonObject>(r, r.end(), {}, readStruct, attributes);
    else if (field === 8) {
      const end = r.end();
      filterMetadata ??= {};
      while (r.pos < end) {
        const t = r.varint();
        if (t >>> 3 === 1 && (t & 7) === 2) readMapEntry<JsonObject>(r, r.end(), {}, readStruct, filterMetadata);
        else r.skip(t & 7);
      }
    } else r.skip(2);
  }
  return filterMetadata === undefined
    ? { request, attributes }
    : { request, attributes, metadataContext: { filterMetadata } };
}

// ---- writing ----

/** Grows as needed; `mark`/`close` write a length-delimited field whose length is known once its content is written. */
class Writer {
  buf: Buffer;
  pos = 0;

  constructor(size: number) {
    this.buf = Buffer.allocUnsafe(size);
  }

  #room(n: number): void {
    if (this.pos + n <= this.buf.byteLength) return;
    const next = Buffer.allocUnsafe(Math.max(this.buf.byteLength * 2, this.pos + n));
    this.buf.copy(next, 0, 0, this.pos);
    this.buf = next;
  }

  varint(v: number): void {
    this.#room(10);
    while (v > 0x7f) {
      this.buf[this.pos++] = (v & 0x7f) | 0x80;
      v = Math.floor(v / 128);
    }
    this.buf[this.pos++] = v;
  }

  tag(field: number, wireType: number): void {
    this.varint(field * 8 + wireType);
  }

  /** Starts a length-delimited field: reserves room for a length of up to 5 bytes. */
  mark(field: number): number {
    this.tag(field, 2);
    this.#room(5);
    const at = this.pos;
    this.pos += 5;
    return at;
  }

  /** Ends the field started at `at`: writes its length, moving the content back over the unused reserved bytes. */
  close(at: number): void {
    const start = at + 5;
    const n = this.pos - start;
    let lenBytes = 1;
    while (n >= 2 ** (7 * lenBytes)) lenBytes++;
    if (lenBytes < 5) this.buf.copyWithin(at + lenBytes, start, this.pos);
    let v = n;
    for (let i = 0; i < lenBytes; i++) {
      this.buf[at + i] = i === lenBytes - 1 ? v : (v & 0x7f) | 0x80;
      v = Math.floor(v / 128);
    }
    this.pos = at + lenBytes + n;
  }

  bytes(field: number, v: Uint8Array): void {
    this.tag(field, 2);
    this.varint(v.byteLength);
    this.#room(v.byteLength);
    this.buf.set(v, this.pos);
    this.pos += v.byteLength;
  }

  string(field: number, v: string, n = Buffer.byteLength(v, "utf8")): void {
    this.tag(field, 2);
    this.varint(n);
    this.#room(n);
    this.pos += this.buf.write(v, this.pos, "utf8");
  }

  double(field: number, v: number): void {
    this.tag(field, 1);
    this.#room(8);
    this.buf.writeDoubleLE(v, this.pos);
    this.pos += 8;
  }

  /** Proto3 implicit presence: zero values are not written. */
  enumOrBool(field: number, v: number | boolean): void {
    const n = typeof v === "boolean" ? (v ? 1 : 0) : v;
    if (n === 0) return;
    this.tag(field, 0);
    this.varint(n);
  }
}

function writeValue(w: Writer, v: JsonValue): void {
  if (v === null) {
    w.tag(1, 0);
    w.varint(0);
  } else if (typeof v === "number") w.double(2, v);
  else if (typeof v === "string") w.string(3, v);
  else if (typeof v === "boolean") {
    w.tag(4, 0);
    w.varint(v ? 1 : 0);
  } else if (Array.isArray(v)) {
    const at = w.mark(6);
    for (const x of v) {
      const e = w.mark(1);
      writeValue(w, x);
      w.close(e);
    }
    w.close(at);
  } else {
    const at = w.mark(5);
    writeStruct(w, v);
    w.close(at);
  }
}

function writeStruct(w: Writer, o: JsonObject): void {
  for (const key of Object.keys(o)) {
    const entry = w.mark(1);
    w.string(1, key);
    const value = w.mark(2);
    writeValue(w, o[key] ?? null);
    w.close(value);
    w.close(entry);
  }
}

/** HeaderValueOption.append_action OVERWRITE_IF_EXISTS_OR_ADD: every header the service sets replaces the client's. */
const OVERWRITE = HeaderValueOption_HeaderAppendAction.OVERWRITE_IF_EXISTS_OR_ADD;

/** Bytes of a varint. */
function varintSize(n: number): number {
  let size = 1;
  while (n >= 2 ** (7 * size)) size++;
  return size;
}

/** Bytes of a length-delimited field of `n` bytes (tag of a field number below 16), 0 when empty (not written). */
function fieldSize(n: number): number {
  return n === 0 ? 0 : 1 + varintSize(n) + n;
}

/** One HeaderValueOption; its length is known from its strings': no length to fix up afterwards. */
function writeHeaderOption(w: Writer, key: string, value: string, overwrite: boolean): void {
  const keyBytes = Buffer.byteLength(key, "utf8");
  const valueBytes = Buffer.byteLength(value, "utf8");
  const header = fieldSize(keyBytes) + fieldSize(valueBytes);
  w.tag(1, 2);
  w.varint(1 + varintSize(header) + header + (overwrite ? 2 : 4));
  w.tag(1, 2);
  w.varint(header);
  if (keyBytes > 0) w.string(1, key, keyBytes);
  // raw_value (bytes): the UTF-8 of the value, written straight from the string.
  if (valueBytes > 0) w.string(3, value, valueBytes);
  if (overwrite) {
    w.tag(3, 0);
    w.varint(OVERWRITE);
  } else {
    // append (BoolValue) true: Envoy's ext_proc reads only this deprecated field (absent: overwrite), not append_action.
    w.tag(2, 2);
    w.varint(2);
    w.tag(1, 0);
    w.varint(1);
  }
}

function writeHeaderMutation(w: Writer, m: ReplyHeaders): void {
  for (const key of Object.keys(m.set)) writeHeaderOption(w, key, m.set[key] as string, true);
  for (const [key, value] of m.add ?? []) writeHeaderOption(w, key, value, false);
  for (const name of m.remove ?? []) w.string(2, name);
}

/** The answer to one message of the exchange: continue, with the changes given. */
export interface PhaseReply {
  /** Trailers (FULL_DUPLEX_STREAMED has them sent) are answered without a change: the other fields are not used. */
  readonly phase:
    | "requestHeaders"
    | "responseHeaders"
    | "requestBody"
    | "responseBody"
    | "requestTrailers"
    | "responseTrailers";
  /**
   * FULL_DUPLEX_STREAMED bodies: `body` goes out as a `streamed_response` chunk (any number of received chunks in
   * one), `endOfStream` on the last.
   */
  readonly streamed?: { readonly endOfStream: boolean };
  /** CONTINUE_AND_REPLACE: `body` replaces the whole message (headers phases) rather than the body seen so far. */
  readonly replace?: boolean;
  readonly headers?: ReplyHeaders;
  /** The new body; a string is sent as its UTF-8. */
  readonly body?: string | Uint8Array;
  readonly metadata?: JsonObject;
  readonly modeOverride?: ReplyMode;
  /** Envoy selects the route again (after changing headers routes match on). */
  readonly clearRouteCache?: boolean;
}

/** An answer Envoy sends to the client instead of going on (the exchange ends). */
export interface ImmediateReply {
  readonly phase: "immediate";
  readonly status: number;
  readonly headers: ReplyHeaders;
  readonly body: string;
  readonly details: string;
}

/**
 * What the LLM service answers: the part of a ProcessingResponse it uses, as plain values (no protobuf-es message is
 * built on the hot path; `replyMessage` builds one for grpc-js and for the wire check).
 */
export type Reply = PhaseReply | ImmediateReply;

/**
 * Headers set (each replacing any the message has, values as UTF-8 raw_value), headers added (appended to any the
 * message has) and header names removed.
 */
export interface ReplyHeaders {
  readonly set: Readonly<Record<string, string>>;
  readonly add?: readonly (readonly [name: string, value: string])[];
  readonly remove?: readonly string[];
}

export interface ReplyMode {
  readonly requestHeaderMode: ProcessingMode_HeaderSendMode;
  readonly responseHeaderMode: ProcessingMode_HeaderSendMode;
  readonly requestBodyMode: ProcessingMode_BodySendMode;
  readonly responseBodyMode: ProcessingMode_BodySendMode;
  readonly requestTrailerMode: ProcessingMode_HeaderSendMode;
  readonly responseTrailerMode: ProcessingMode_HeaderSendMode;
}

const PHASE_FIELDS = {
  requestHeaders: 1,
  responseHeaders: 2,
  requestBody: 3,
  responseBody: 4,
  requestTrailers: 5,
  responseTrailers: 6,
} as const;

function writeBody(w: Writer, field: number, body: string | Uint8Array): void {
  if (typeof body === "string") w.string(field, body);
  else w.bytes(field, body);
}

/** A ProcessingResponse's bytes for `r`, as protobuf-es would encode `replyMessage(r)`. */
export function writeReply(r: Reply): Uint8Array {
  // Room for the body (a string's UTF-8 is usually its length: JSON is mostly ASCII) and the rest; more is added when needed.
  const w = new Writer((typeof r.body === "string" ? r.body.length : (r.body?.byteLength ?? 0)) + 512);
  if (r.phase === "immediate") {
    const at = w.mark(7);
    const s = w.mark(1);
    w.enumOrBool(1, r.status);
    w.close(s);
    const h = w.mark(2);
    writeHeaderMutation(w, r.headers);
    w.close(h);
    if (r.body !== "") w.string(3, r.body);
    if (r.details !== "") w.string(5, r.details);
    w.close(at);
    return w.buf.subarray(0, w.pos);
  }
  if (r.phase === "requestTrailers" || r.phase === "responseTrailers") {
    w.close(w.mark(PHASE_FIELDS[r.phase]));
    return w.buf.subarray(0, w.pos);
  }
  const at = w.mark(PHASE_FIELDS[r.phase]);
  const common = w.mark(1);
  w.enumOrBool(1, r.replace === true ? CommonResponse_ResponseStatus.CONTINUE_AND_REPLACE : 0);
  if (r.headers !== undefined) {
    const h = w.mark(2);
    writeHeaderMutation(w, r.headers);
    w.close(h);
  }
  if (r.body !== undefined && r.streamed !== undefined) {
    const b = w.mark(3);
    const c = w.mark(3);
    if ((typeof r.body === "string" ? r.body.length : r.body.byteLength) > 0) writeBody(w, 1, r.body);
    w.enumOrBool(2, r.streamed.endOfStream);
    w.close(c);
    w.close(b);
  } else if (r.body !== undefined) {
    const b = w.mark(3);
    writeBody(w, 1, r.body);
    w.close(b);
  }
  if (r.clearRouteCache === true) w.enumOrBool(5, 1);
  w.close(common);
  w.close(at);
  if (r.metadata !== undefined) {
    const m = w.mark(8);
    writeStruct(w, r.metadata);
    w.close(m);
  }
  if (r.modeOverride !== undefined) {
    const m = r.modeOverride;
    const o = w.mark(9);
    w.enumOrBool(1, m.requestHeaderMode);
    w.enumOrBool(2, m.responseHeaderMode);
    w.enumOrBool(3, m.requestBodyMode);
    w.enumOrBool(4, m.responseBodyMode);
    w.enumOrBool(5, m.requestTrailerMode);
    w.enumOrBool(6, m.responseTrailerMode);
    w.close(o);
  }
  return w.buf.subarray(0, w.pos);
}

const te = new TextEncoder();

function headerMutationInit(m: ReplyHeaders): MessageInitShape<typeof HeaderMutationSchema> {
  return {
    setHeaders: [
      ...Object.entries(m.set).map(([key, v]) => ({
        header: { key, rawValue: te.encode(v) },
        appendAction: OVERWRITE,
      })),
      ...(m.add ?? []).map(([key, v]) => ({
        header: { key, rawValue: te.encode(v) },
        append: true,
        appendAction: HeaderValueOption_HeaderAppendAction.APPEND_IF_EXISTS_OR_ADD,
      })),
    ],
    removeHeaders: [...(m.remove ?? [])],
  };
}

/** `r` as a protobuf-es ProcessingResponse (for grpc-js, and the reference of the wire check). */
export function replyMessage(r: Reply): ProcessingResponse {
  if (r.phase === "immediate") {
    return create(ProcessingResponseSchema, {
      response: {
        case: "immediateResponse",
        value: {
          status: { code: r.status },
          headers: headerMutationInit(r.headers),
          body: te.encode(r.body),
          details: r.details,
        },
      },
    });
  }
  if (r.phase === "requestTrailers" || r.phase === "responseTrailers") {
    return create(ProcessingResponseSchema, { response: { case: r.phase, value: {} } });
  }
  const body = r.body === undefined ? undefined : typeof r.body === "string" ? te.encode(r.body) : r.body;
  const mutation =
    body === undefined
      ? undefined
      : r.streamed !== undefined
        ? { case: "streamedResponse" as const, value: { body, endOfStream: r.streamed.endOfStream } }
        : { case: "body" as const, value: body };
  return create(ProcessingResponseSchema, {
    response: {
      case: r.phase,
      value: {
        response: {
          ...(r.replace === true ? { status: CommonResponse_ResponseStatus.CONTINUE_AND_REPLACE } : {}),
          ...(r.headers !== undefined ? { headerMutation: headerMutationInit(r.headers) } : {}),
          ...(mutation !== undefined ? { bodyMutation: { mutation } } : {}),
          ...(r.clearRouteCache === true ? { clearRouteCache: true } : {}),
        },
      },
    },
    ...(r.metadata !== undefined ? { dynamicMetadata: r.metadata } : {}),
    ...(r.modeOverride !== undefined ? { modeOverride: r.modeOverride } : {}),
  });
}

// ---- the check against protobuf-es ----

/**
 * `SLUICE_EXTPROC_WIRE_CHECK=1` (the test suite sets it): every message the hot path reads or writes is also decoded or
 * encoded by protobuf-es, and a difference is an error.
 */
export const WIRE_CHECK = process.env["SLUICE_EXTPROC_WIRE_CHECK"] === "1";

/** The parts of a request the service reads, comparable as JSON. */
function wireView(req: ExtProcRequest): string {
  const r = req.request;
  const hex = (b: Uint8Array) => Buffer.from(b).toString("hex");
  const value =
    r.case === "requestHeaders" || r.case === "responseHeaders"
      ? {
          headers: r.value.headers?.headers.map((h) => [h.key, h.value, hex(h.rawValue)]),
          endOfStream: r.value.endOfStream,
        }
      : r.case === "requestBody" || r.case === "responseBody"
        ? { body: hex(r.value.body), endOfStream: r.value.endOfStream }
        : undefined;
  const metadata = req.metadataContext?.filterMetadata ?? {};
  return JSON.stringify({ case: r.case, value, attributes: req.attributes, metadata });
}

export function checkRead(bytes: Uint8Array, req: ExtProcRequest): void {
  const reference = fromBinary(ProcessingRequestSchema, bytes);
  if (wireView(reference) !== wireView(req)) {
    throw new Error(`wire reader differs from protobuf-es: ${wireView(req)} vs ${wireView(reference)}`);
  }
}

export function checkWrite(r: Reply, bytes: Uint8Array): void {
  const reference = toBinary(ProcessingResponseSchema, replyMessage(r));
  if (Buffer.compare(Buffer.from(reference), Buffer.from(bytes)) !== 0) {
    throw new Error(`wire writer differs from protobuf-es for ${r.phase}`);
  }
}
