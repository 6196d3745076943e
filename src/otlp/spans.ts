// What Sluice's span relay (./relay.ts) does to an OTLP trace export before the user's collector gets it: the spans
// whose `filter` did not hold are dropped, and the attributes `attributes.remove` names are taken out of each span.
// Envoy's tracer can do neither: it sets its default span attributes on every span, and decides whether a span is
// exported when the span starts, before the response is known. The translator asks Envoy for a span attribute
// (FILTER_TAG) holding the filter's value when the span finished, and points the tracer at the relay with a
// RelaySpec in the export call's metadata.
//
// The export is rewritten at the wire level (ExportTraceServiceRequest → ResourceSpans → ScopeSpans → Span →
// KeyValue, opentelemetry/proto/collector/trace/v1 and trace/v1): every other field is copied as it came.

import { BinaryReader, BinaryWriter, WireType } from "@bufbuild/protobuf/wire";

/** The gRPC metadata carrying a RelaySpec on Envoy's export call. */
export const RELAY_METADATA = "x-sluice-span-relay";
/** The span attribute Envoy sets to the `filter` expression's value; the relay reads it and takes it out. */
export const FILTER_TAG = "sluice.span_filter";
/** OTLP/gRPC's trace export method. */
export const EXPORT_PATH = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";

export interface RelaySpec {
  /** The collector's cluster (`tracing/<ns>/<name>`) in the Gateway's xDS: the relay sends to its endpoints. */
  readonly cluster: string;
  readonly protocol: "GRPC" | "HTTP";
  /** HTTP only: the export path. */
  readonly path: string;
  /** The `:authority` / Host of the export. */
  readonly authority: string;
  /** Span attributes taken out. */
  readonly remove: readonly string[];
  /** Spans are kept only when FILTER_TAG is `true`. */
  readonly filter: boolean;
}

export function encodeRelaySpec(s: RelaySpec): string {
  return Buffer.from(JSON.stringify(s)).toString("base64url");
}

/** The spec in a call's metadata, or why it cannot be read. */
export function decodeRelaySpec(text: string | undefined): RelaySpec | { error: string } {
  if (text === undefined) return { error: `no ${RELAY_METADATA} metadata` };
  let v: unknown;
  try {
    v = JSON.parse(Buffer.from(text, "base64url").toString("utf8"));
  } catch {
    return { error: `${RELAY_METADATA} is not base64url JSON` };
  }
  const r = v as Partial<RelaySpec> | null;
  if (
    r === null ||
    typeof r !== "object" ||
    typeof r.cluster !== "string" ||
    (r.protocol !== "GRPC" && r.protocol !== "HTTP") ||
    typeof r.path !== "string" ||
    typeof r.authority !== "string" ||
    !Array.isArray(r.remove) ||
    !r.remove.every((x) => typeof x === "string") ||
    typeof r.filter !== "boolean"
  ) {
    return { error: `${RELAY_METADATA} is not a relay spec` };
  }
  return r as RelaySpec;
}

/** What a rewrite did, for the caller's counters and tests. */
export interface RewriteResult {
  readonly bytes: Uint8Array;
  readonly spans: number;
  readonly dropped: number;
}

type Visit = (no: number, value: Uint8Array) => Uint8Array | null | undefined;

/**
 * A message with each length-delimited field passed to `visit`: undefined keeps it as it was, null drops it, bytes
 * replace its value. Other fields are copied unchanged.
 */
function mapFields(bytes: Uint8Array, visit: Visit): Uint8Array {
  const r = new BinaryReader(bytes);
  const w = new BinaryWriter();
  while (r.pos < r.len) {
    const start = r.pos;
    const [no, type] = r.tag();
    if (type !== WireType.LengthDelimited) {
      r.skip(type, no);
      w.raw(bytes.subarray(start, r.pos));
      continue;
    }
    const value = r.bytes();
    const out = visit(no, value);
    if (out === undefined) w.raw(bytes.subarray(start, r.pos));
    else if (out !== null) w.tag(no, WireType.LengthDelimited).bytes(out);
  }
  return w.finish();
}

/** Calls `fn` for each length-delimited field `no` of a message. */
function eachField(bytes: Uint8Array, no: number, fn: (value: Uint8Array) => void): void {
  const r = new BinaryReader(bytes);
  while (r.pos < r.len) {
    const [n, type] = r.tag();
    if (n === no && type === WireType.LengthDelimited) fn(r.bytes());
    else r.skip(type, n);
  }
}

const utf8 = new TextDecoder();

/** A KeyValue's key (field 1). */
function keyOf(kv: Uint8Array): string {
  let key = "";
  eachField(kv, 1, (b) => {
    key = utf8.decode(b);
  });
  return key;
}

/** A KeyValue's value (AnyValue, field 2) when it is a string (field 1) or a bool (field 2). */
function attributeValue(kv: Uint8Array): string | boolean | undefined {
  let out: string | boolean | undefined;
  eachField(kv, 2, (any) => {
    const r = new BinaryReader(any);
    while (r.pos < r.len) {
      const [n, type] = r.tag();
      if (n === 1 && type === WireType.LengthDelimited) out = r.string();
      else if (n === 2 && type === WireType.Varint) out = r.bool();
      else r.skip(type, n);
    }
  });
  return out;
}

const SPAN_ATTRIBUTES = 9;

/** One Span: null when the filter drops it, else its bytes without the removed attributes. */
function rewriteSpan(span: Uint8Array, remove: ReadonlySet<string>, filter: boolean): Uint8Array | null {
  if (filter) {
    let kept = false;
    eachField(span, SPAN_ATTRIBUTES, (kv) => {
      if (keyOf(kv) === FILTER_TAG) {
        const v = attributeValue(kv);
        kept = v === "true" || v === true;
      }
    });
    // A filter whose value is missing (the expression failed) or not true: the span is not exported.
    if (!kept) return null;
  }
  return mapFields(span, (no, value) => {
    if (no !== SPAN_ATTRIBUTES) return undefined;
    const key = keyOf(value);
    return key === FILTER_TAG || remove.has(key) ? null : undefined;
  });
}

/**
 * An ExportTraceServiceRequest with the spec applied. ScopeSpans and ResourceSpans left without spans are dropped
 * (an export of none is still a valid request).
 */
export function rewriteExport(body: Uint8Array, spec: Pick<RelaySpec, "remove" | "filter">): RewriteResult {
  const remove = new Set(spec.remove);
  let spans = 0;
  let dropped = 0;
  const bytes = mapFields(body, (no, resourceSpans) => {
    if (no !== 1) return undefined;
    let scopes = 0;
    const rs = mapFields(resourceSpans, (f, scopeSpans) => {
      if (f !== 2) return undefined;
      let left = 0;
      const ss = mapFields(scopeSpans, (g, span) => {
        if (g !== 2) return undefined;
        spans++;
        const out = rewriteSpan(span, remove, spec.filter);
        if (out === null) dropped++;
        else left++;
        return out;
      });
      if (left === 0) return null;
      scopes++;
      return ss;
    });
    return scopes === 0 ? null : rs;
  });
  return { bytes, spans, dropped };
}
