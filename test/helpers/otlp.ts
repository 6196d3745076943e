// A local OTLP/HTTP receiver for tests: keeps every export, and decodes the spans of trace exports (protobuf
// ExportTraceServiceRequest, opentelemetry/proto/collector/trace/v1) into ids, names and attributes. Also the YAML
// that has Envoy trace every request to it.

import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { BinaryReader, type WireType } from "@bufbuild/protobuf/wire";
import { localService } from "./gateway.js";

export interface OtlpSpan {
  /** Hex. */
  readonly traceId: string;
  readonly spanId: string;
  /** Empty for a root span. */
  readonly parentSpanId: string;
  readonly name: string;
  readonly kind: number;
  readonly attributes: Readonly<Record<string, string | number | boolean>>;
  /** The `service.name` of its resource. */
  readonly service: string;
}

export interface OtlpExport {
  readonly path: string;
  readonly contentType: string | undefined;
  readonly body: Buffer;
}

export interface OtlpReceiver {
  readonly port: number;
  /** Where an OTLP/HTTP trace exporter sends (`--otlp-endpoint`, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT). */
  readonly tracesUrl: string;
  /** Spans of every trace export so far. */
  readonly spans: OtlpSpan[];
  /** Every export (traces, logs, ...) so far, in arrival order. */
  readonly exports: OtlpExport[];
  close(): Promise<void>;
}

const hex = (b: Uint8Array) => Buffer.from(b).toString("hex");

/** Each field of a message as (field number, reader positioned at its value) in turn. */
function fields(bytes: Uint8Array, on: (field: number, type: WireType, r: BinaryReader) => void): void {
  const r = new BinaryReader(bytes);
  while (r.pos < r.len) {
    const [no, type] = r.tag();
    const before = r.pos;
    on(no, type, r);
    if (r.pos === before) r.skip(type, no);
  }
}

function anyValue(bytes: Uint8Array): string | number | boolean {
  let v: string | number | boolean = "";
  fields(bytes, (no, _t, r) => {
    if (no === 1) v = r.string();
    else if (no === 2) v = r.bool();
    else if (no === 3) v = Number(r.int64());
    else if (no === 4) v = r.double();
  });
  return v;
}

function keyValue(bytes: Uint8Array, into: Record<string, string | number | boolean>): void {
  let key = "";
  let value: string | number | boolean = "";
  fields(bytes, (no, _t, r) => {
    if (no === 1) key = r.string();
    else if (no === 2) value = anyValue(r.bytes());
  });
  into[key] = value;
}

function span(bytes: Uint8Array, service: string): OtlpSpan {
  let traceId = "";
  let spanId = "";
  let parentSpanId = "";
  let name = "";
  let kind = 0;
  const attributes: Record<string, string | number | boolean> = {};
  fields(bytes, (no, _t, r) => {
    if (no === 1) traceId = hex(r.bytes());
    else if (no === 2) spanId = hex(r.bytes());
    else if (no === 4) parentSpanId = hex(r.bytes());
    else if (no === 5) name = r.string();
    else if (no === 6) kind = r.int32();
    else if (no === 9) keyValue(r.bytes(), attributes);
  });
  return { traceId, spanId, parentSpanId, name, kind, attributes, service };
}

/** The spans of an ExportTraceServiceRequest. */
export function decodeTraceExport(body: Uint8Array): OtlpSpan[] {
  const out: OtlpSpan[] = [];
  fields(body, (no, _t, r) => {
    if (no !== 1) return;
    const resourceSpans = r.bytes();
    let service = "";
    const scopeSpans: Uint8Array[] = [];
    fields(resourceSpans, (f, _t2, rr) => {
      if (f === 1) {
        const attrs: Record<string, string | number | boolean> = {};
        fields(rr.bytes(), (a, _t3, ar) => {
          if (a === 1) keyValue(ar.bytes(), attrs);
        });
        service = String(attrs["service.name"] ?? "");
      } else if (f === 2) scopeSpans.push(rr.bytes());
    });
    for (const ss of scopeSpans)
      fields(ss, (f, _t2, rr) => {
        if (f === 2) out.push(span(rr.bytes(), service));
      });
  });
  return out;
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: OtlpSpan[] = [];
  const exports: OtlpExport[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const path = req.url ?? "";
      const body = Buffer.concat(chunks);
      exports.push({ path, contentType: req.headers["content-type"], body });
      if (path === "/v1/traces" && req.headers["content-type"] === "application/x-protobuf") {
        try {
          spans.push(...decodeTraceExport(body));
        } catch {
          res.writeHead(400);
          res.end();
          return;
        }
      }
      res.writeHead(200, { "content-type": "application/x-protobuf" });
      res.end();
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    tracesUrl: `http://127.0.0.1:${port}/v1/traces`,
    spans,
    exports,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

/**
 * YAML documents (each from `---`, the last ending in a newline) for Envoy to trace every request to a receiver on
 * `port`: a Service `collector` and a Gateway-wide GwPolicy `tracing` sending OTLP/HTTP to it, sampling all.
 */
export function tracingYaml(port: number): string {
  return `${localService("collector", port)}---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: tracing, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: Gateway, name: gw }]
  frontend:
    tracing:
      backendRef: { name: collector, port: 80 }
      protocol: HTTP
      randomSampling: "1.0"
`;
}
