// One neutral error shape for everything that can go wrong in translation or upstream, rendered in the client's own
// error format so its SDK raises the error class it would raise against the real provider (SDKs branch on status).
import type { ClientFormat } from "./formats/names.js";
import { isObject, type JsonObject, num, parseJson, str } from "./json.js";

export type ErrorKind =
  | "invalid_request"
  | "authentication"
  | "permission"
  | "not_found"
  | "request_too_large"
  | "rate_limit"
  | "server"
  | "overloaded"
  | "timeout";

export interface LlmError {
  readonly status: number;
  readonly kind: ErrorKind;
  readonly message: string;
  /** Provider-specific code or type, kept for logs and for OpenAI's `code` field. */
  readonly code?: string;
  readonly param?: string;
}

export function kindForStatus(status: number): ErrorKind {
  if (status === 401) return "authentication";
  if (status === 403) return "permission";
  if (status === 404) return "not_found";
  if (status === 413) return "request_too_large";
  if (status === 429) return "rate_limit";
  if (status === 408 || status === 504) return "timeout";
  if (status === 503 || status === 529) return "overloaded";
  if (status >= 500) return "server";
  return "invalid_request";
}

export function invalidRequest(message: string, param?: string): LlmError {
  return param === undefined
    ? { status: 400, kind: "invalid_request", message }
    : { status: 400, kind: "invalid_request", message, param };
}

const openaiType: Record<ErrorKind, string> = {
  invalid_request: "invalid_request_error",
  authentication: "authentication_error",
  permission: "permission_error",
  not_found: "invalid_request_error",
  request_too_large: "invalid_request_error",
  rate_limit: "rate_limit_error",
  server: "server_error",
  overloaded: "server_error",
  timeout: "timeout_error",
};

const anthropicType: Record<ErrorKind, string> = {
  invalid_request: "invalid_request_error",
  authentication: "authentication_error",
  permission: "permission_error",
  not_found: "not_found_error",
  request_too_large: "request_too_large",
  rate_limit: "rate_limit_error",
  server: "api_error",
  overloaded: "overloaded_error",
  timeout: "timeout_error",
};

const googleStatus: Record<ErrorKind, string> = {
  invalid_request: "INVALID_ARGUMENT",
  authentication: "UNAUTHENTICATED",
  permission: "PERMISSION_DENIED",
  not_found: "NOT_FOUND",
  request_too_large: "INVALID_ARGUMENT",
  rate_limit: "RESOURCE_EXHAUSTED",
  server: "INTERNAL",
  overloaded: "UNAVAILABLE",
  timeout: "DEADLINE_EXCEEDED",
};

const bedrockType: Record<ErrorKind, string> = {
  invalid_request: "ValidationException",
  authentication: "UnrecognizedClientException",
  permission: "AccessDeniedException",
  not_found: "ResourceNotFoundException",
  request_too_large: "ValidationException",
  rate_limit: "ThrottlingException",
  server: "InternalServerException",
  overloaded: "ServiceUnavailableException",
  timeout: "ModelTimeoutException",
};

/** The error body for a client speaking `format` (the JSON that goes on the wire, and in streams the event data). */
export function errorBody(format: ClientFormat | "converse" | "generate-content", err: LlmError): JsonObject {
  switch (format) {
    case "messages":
    case "count-tokens":
      return { type: "error", error: { type: anthropicType[err.kind], message: err.message } };
    case "generate-content":
    case "generate-content-count-tokens":
    case "embed-content":
    case "batch-embed-contents":
      return { error: { code: err.status, message: err.message, status: googleStatus[err.kind] } };
    case "converse":
      return { message: err.message };
    default:
      return {
        error: {
          message: err.message,
          type: openaiType[err.kind],
          param: err.param ?? null,
          code: err.code ?? null,
        },
      };
  }
}

export function bedrockErrorType(err: LlmError): string {
  return bedrockType[err.kind];
}

/** A provider's error response (any of the wire formats) read into the neutral shape. Unknown bodies keep the status
 * and a generic message, so the client still gets the right class of error. */
export function parseProviderError(status: number, body: string, headers?: Readonly<Record<string, string>>): LlmError {
  const code0 = headers?.["x-amzn-errortype"]?.split(":")[0];
  const parsed = parseJson(body);
  const kind = kindForStatus(status);
  const fallback =
    body.length > 0 && body.length < 512 && !parsed.ok
      ? body
      : headers?.["x-envoy-ratelimited"] === "true"
        ? "rate limit exceeded"
        : `upstream returned HTTP ${status}`;
  if (!parsed.ok || !isObject(parsed.value)) return withCode({ status, kind, message: fallback }, code0);
  const v = parsed.value;
  // OpenAI {error:{message,type,code}}, Gemini {error:{code,message,status}}, Anthropic {type:"error",error:{type,message}}
  if (isObject(v.error)) {
    const e = v.error;
    const message = str(e.message) ?? fallback;
    const code = str(e.code) ?? str(e.status) ?? str(e.type) ?? (num(e.code) !== undefined ? undefined : code0);
    return withCode({ status, kind, message }, code);
  }
  if (typeof v.error === "string") return withCode({ status, kind, message: v.error }, code0);
  // Bedrock: {message} or {Message}, type in x-amzn-ErrorType or __type.
  const message = str(v.message) ?? str(v.Message) ?? fallback;
  return withCode({ status, kind, message }, code0 ?? str(v.__type)?.split("#").pop());
}

function withCode(e: LlmError, code: string | undefined): LlmError {
  return code === undefined ? e : { ...e, code };
}
