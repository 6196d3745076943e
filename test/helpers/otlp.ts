// A local OTLP/HTTP receiver for tests: keeps every export, and decodes the spans of trace exports (protobuf
// ExportTraceServiceRequest, opentelemetry/proto/collector/trace/v1) into ids, names and attributes. Also the YAML
// that has Envoy trace every request to it, and an OTLP/gRPC collector (traces and logs, TLS optional).

import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import type { AddressInfo } from "node:net";
import type { TLSSocket } from "node:tls";
import { BinaryReader, type WireType } from "@bufbuild/protobuf/wire";
import type * as grpc from "@grpc/grpc-js";
import { localService } from "./gateway.js";
import { type GrpcTestServer, serve, type TestServerTls } from "./grpc-services.js";

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
  /** Over TLS with client certificates asked for: the subject CN of the one the client presented. */
  readonly clientCertificate?: string;
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

/** With `tls`, over HTTPS only (and mTLS with its `clientCa`). */
export async function startOtlpReceiver(tls?: TestServerTls): Promise<OtlpReceiver> {
  const spans: OtlpSpan[] = [];
  const exports: OtlpExport[] = [];
  const handler = (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const path = req.url ?? "";
      const body = Buffer.concat(chunks);
      const socket = req.socket as Partial<TLSSocket>;
      const cn = tls?.clientCa !== undefined ? socket.getPeerCertificate?.()?.subject?.CN : undefined;
      exports.push({
        path,
        contentType: req.headers["content-type"],
        body,
        ...(cn !== undefined ? { clientCertificate: String(cn) } : {}),
      });
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
  };
  const server: Server =
    tls === undefined
      ? createServer(handler)
      : createHttpsServer(
          {
            cert: tls.cert,
            key: tls.key,
            ...(tls.clientCa !== undefined ? { ca: tls.clientCa, requestCert: true, rejectUnauthorized: true } : {}),
          },
          handler,
        );
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    tracesUrl: `${tls === undefined ? "http" : "https"}://127.0.0.1:${port}/v1/traces`,
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

export interface OtlpLogRecord {
  /** The body, when a string. */
  readonly body: string;
  readonly attributes: Readonly<Record<string, string | number | boolean>>;
}

/** The log records of an ExportLogsServiceRequest (opentelemetry/proto/collector/logs/v1). */
export function decodeLogExport(bytes: Uint8Array): OtlpLogRecord[] {
  const out: OtlpLogRecord[] = [];
  // ResourceLogs (1) → ScopeLogs (2) → LogRecord (2): body (5), attributes (6).
  fields(bytes, (no, _t, r) => {
    if (no !== 1) return;
    fields(r.bytes(), (f, _t2, rr) => {
      if (f !== 2) return;
      fields(rr.bytes(), (g, _t3, lr) => {
        if (g !== 2) return;
        let body = "";
        const attributes: Record<string, string | number | boolean> = {};
        fields(lr.bytes(), (h, _t4, vr) => {
          if (h === 5) body = String(anyValue(vr.bytes()));
          else if (h === 6) keyValue(vr.bytes(), attributes);
        });
        out.push({ body, attributes });
      });
    });
  });
  return out;
}

export const TRACE_EXPORT_PATH = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";
export const LOGS_EXPORT_PATH = "/opentelemetry.proto.collector.logs.v1.LogsService/Export";

export interface OtlpGrpcCollector extends GrpcTestServer {
  readonly spans: OtlpSpan[];
  readonly logs: OtlpLogRecord[];
  /** The `:authority` of each export. */
  readonly authorities: string[];
}

/**
 * An OTLP/gRPC collector (a grpc-js server with the TraceService and LogsService Export methods, messages kept as
 * bytes and decoded): keeps the spans and log records it receives. With `tls`, over TLS only.
 */
export async function startOtlpGrpcCollector(tls?: TestServerTls): Promise<OtlpGrpcCollector> {
  const spans: OtlpSpan[] = [];
  const logs: OtlpLogRecord[] = [];
  const authorities: string[] = [];
  const raw = (b: Buffer) => b;
  const method = (path: string) => ({
    path,
    requestStream: false,
    responseStream: false,
    requestSerialize: raw,
    requestDeserialize: raw,
    responseSerialize: raw,
    responseDeserialize: raw,
  });
  const exported =
    (into: (b: Buffer) => void) => (call: grpc.ServerUnaryCall<Buffer, Buffer>, done: grpc.sendUnaryData<Buffer>) => {
      authorities.push(call.getHost());
      into(call.request);
      // An empty Export*ServiceResponse.
      done(null, Buffer.alloc(0));
    };
  const s = await serve((server) => {
    server.addService(
      { export: method(TRACE_EXPORT_PATH) },
      { export: exported((b) => spans.push(...decodeTraceExport(b))) },
    );
    server.addService(
      { export: method(LOGS_EXPORT_PATH) },
      { export: exported((b) => logs.push(...decodeLogExport(b))) },
    );
  }, tls);
  return { ...s, spans, logs, authorities };
}
