// JSON-RPC 2.0 as MCP uses it: message shapes, validation of what a client sends, and the error codes.

export type JsonRpcId = string | number;

export interface JsonRpcRequest {
  readonly jsonrpc: "2.0";
  readonly id: JsonRpcId;
  readonly method: string;
  readonly params?: Record<string, unknown>;
}

export interface JsonRpcNotification {
  readonly jsonrpc: "2.0";
  readonly method: string;
  readonly params?: Record<string, unknown>;
}

export interface JsonRpcResponse {
  readonly jsonrpc: "2.0";
  readonly id: JsonRpcId | null;
  readonly result?: unknown;
  readonly error?: JsonRpcErrorObject;
}

export interface JsonRpcErrorObject {
  readonly code: number;
  readonly message: string;
  readonly data?: unknown;
}

export type JsonRpcMessage = JsonRpcRequest | JsonRpcNotification | JsonRpcResponse;

export const ErrorCodes = {
  ParseError: -32700,
  InvalidRequest: -32600,
  MethodNotFound: -32601,
  InvalidParams: -32602,
  InternalError: -32603,
  /** MCP: a session or target that cannot serve (implementation-defined server error range). */
  ServerError: -32000,
} as const;

/** An error to answer a request with; `code` and `message` go to the client as they are. */
export class RpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
  }

  toObject(): JsonRpcErrorObject {
    return { code: this.code, message: this.message, ...(this.data !== undefined ? { data: this.data } : {}) };
  }
}

export function errorResponse(id: JsonRpcId | null, e: JsonRpcErrorObject): JsonRpcResponse {
  return { jsonrpc: "2.0", id, error: e };
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function validId(v: unknown): v is JsonRpcId {
  return (typeof v === "string" && v.length <= 256) || (typeof v === "number" && Number.isFinite(v));
}

export type Parsed =
  | { readonly ok: true; readonly message: JsonRpcMessage }
  | { readonly ok: false; readonly error: JsonRpcResponse };

/** One message a client POSTed: valid JSON-RPC 2.0, one message (MCP since 2025-06-18 has no batches). */
export function parseMessage(body: string): Parsed {
  let v: unknown;
  try {
    v = JSON.parse(body);
  } catch (e) {
    return {
      ok: false,
      error: errorResponse(null, {
        code: ErrorCodes.ParseError,
        message: `Parse error: ${(e as Error).message}`,
      }),
    };
  }
  const invalid = (why: string, id: JsonRpcId | null = null): Parsed => ({
    ok: false,
    error: errorResponse(id, { code: ErrorCodes.InvalidRequest, message: `Invalid Request: ${why}` }),
  });
  if (Array.isArray(v))
    return invalid("JSON-RPC batches are not supported (MCP 2025-06-18 removed them); send one message per POST");
  if (!isRecord(v)) return invalid("a message is a JSON object");
  const id = validId(v["id"]) ? v["id"] : null;
  if (v["jsonrpc"] !== "2.0") return invalid('"jsonrpc" must be "2.0"', id);
  if ("params" in v && v["params"] !== undefined && !isRecord(v["params"])) {
    return invalid('"params" must be an object', id);
  }
  if ("method" in v) {
    if (typeof v["method"] !== "string" || v["method"] === "")
      return invalid('"method" must be a non-empty string', id);
    if ("id" in v) {
      if (!validId(v["id"])) return invalid('"id" must be a string or a number (not null)');
      return { ok: true, message: v as unknown as JsonRpcRequest };
    }
    return { ok: true, message: v as unknown as JsonRpcNotification };
  }
  if ("result" in v || "error" in v) {
    if (!validId(v["id"])) return invalid('a response needs the "id" of its request');
    if ("error" in v && (!isRecord(v["error"]) || typeof v["error"]["code"] !== "number")) {
      return invalid('"error" must be an object with a numeric "code"', id);
    }
    return { ok: true, message: v as unknown as JsonRpcResponse };
  }
  return invalid('a message has a "method" (request, notification) or a "result" / "error" (response)', id);
}

export function isRequest(m: JsonRpcMessage): m is JsonRpcRequest {
  return "method" in m && "id" in m;
}

export function isNotification(m: JsonRpcMessage): m is JsonRpcNotification {
  return "method" in m && !("id" in m);
}
