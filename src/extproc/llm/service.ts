// The LLM ext_proc (envoy.service.ext_proc.v3.ExternalProcessor) at its two places in Envoy (ARCHITECTURE.md):
// - router level, once per request: reads the route type and the client's body, enforces `tokens` limits, keeps the
//   request in memory under an id it adds as a header, and translates the final response (buffered or streamed chunk
//   by chunk) from the format of the provider that answered into the client's;
// - upstream (cluster) level, once per attempt: finds the request by that id and the provider by the endpoint Envoy
//   picked, and does the provider work: applies the provider's AI request policies, translates the body, sets path,
//   host and credentials (SigV4 on the final body), and replaces the request. A retry to a provider of another format
//   is translated anew.
// A route whose requests reach one provider only (the table entry's `single`, translate/llm/stages.ts) is served in
// one stage: the router level does the provider work itself, on the request body (or the request headers for route
// types forwarded as they are), and Envoy opens no upstream stream for it.
// Never throws on input: every failure becomes an error in the client's own format.

import { randomUUID } from "node:crypto";
import type { JsonObject } from "@bufbuild/protobuf";
import type * as grpc from "@grpc/grpc-js";
import { A2A_STAGE, serveA2a } from "../../a2a/agent-card.js";
import { Minter, type Mutation, writeAt } from "../../credentials/mint.js";
import { EXTAUTHZ_METADATA_KEY, EXTAUTHZ_METADATA_NAMESPACE } from "../../extauthz/user-ext-auth.js";
import {
  ProcessingMode_BodySendMode,
  ProcessingMode_HeaderSendMode,
} from "../../gen/envoy/extensions/filters/http/ext_proc/v3/processing_mode_pb.js";
import { ExternalProcessor } from "../../gen/envoy/service/ext_proc/v3/external_processor_pb.js";
import { addGrpcService } from "../../grpc/service.js";
import type { BidiHandler } from "../../grpc/unary-server.js";
import { kindForStatus } from "../../llm/errors.js";
import {
  addConverseCachePoints,
  type ClientFormat,
  clientError,
  type Direction,
  defaultContext,
  findDirection,
  type LlmError,
  type ProviderFormat,
  type RequestMeta,
  type StreamTranslator,
  type TokenUsage,
  translateError,
} from "../../llm/index.js";
import { isObject } from "../../llm/json.js";
import { extractUsage } from "../../llm/usage.js";
import { llmAborted, llmChunk, llmCompleted, llmFailed, llmStarted } from "../../observability/llm.js";
import type { GuardSpec, PromptGuardEntry } from "../../translate/llm/guards.js";
import type { ProviderExtAuthConfig } from "../../translate/llm/provider-ext-auth.js";
import type { SingleStage } from "../../translate/llm/stages.js";
import {
  LLM_CLUSTER_ATTRIBUTE,
  LLM_ENTRY_METADATA,
  LLM_METADATA_KEYS,
  LLM_METADATA_NAMESPACE,
  LLM_PROVIDER_ATTRIBUTE,
  LLM_REQUEST_ID_HEADER,
  LLM_SINGLE_PROVIDER_ATTRIBUTE,
  LLM_STAGE_METADATA,
  type LlmProviderEntry,
  type LlmRouteEntry,
  type RouteType,
} from "../../translate/llm/table.js";
import type { ModelRouteEntry } from "../../translate/model/ir.js";
import { clusterVariantBase, MODEL_CLUSTER_HEADER, SLUICE_AUTHZ_HTTP_CLUSTER } from "../../translate/names.js";
import type { TranslationResult } from "../../translate/translate.js";
import { PICKED_ENDPOINT_METADATA } from "../../translate/xds/llm.js";
import { CONTEXT_METADATA, CONTEXT_STAGE, decodeContext, serveContext } from "../context.js";
import {
  type AttemptJournal,
  type AttemptState,
  decodeTransformation,
  serveTransformation,
  TRANSFORMATION_METADATA,
  TRANSFORMATION_STAGE,
} from "../transformation.js";
import { AwsCredentialSource, type RoleSession, roleSession } from "./aws-credentials.js";
import { identityVariables, requestVariable, toCel, withExtauthz } from "./cel.js";
import { type Completion, completionMetadata } from "./completion.js";
import { GoogleTokens } from "./google-tokens.js";
import { type GuardContext, type GuardOutcome, runGuards } from "./guards/runner.js";
import { StreamGuard } from "./guards/stream.js";
import { requestSlots, responseSlots } from "./guards/text.js";
import { ModelHealth } from "./models/health.js";
import { LIST_ERROR_FORMAT, type ListingAttempt, listingAnswer, listingRequest } from "./models/list.js";
import {
  authorizeModel,
  chooseModel,
  discoveryAnswer,
  type HeaderChanges,
  ModelAttempts,
  type ModelChoice,
  modelHeaders,
  modelTarget,
  thenHeaders,
  virtualChain,
  withVirtualPolicies,
} from "./models/serve.js";
import { applyAiPolicy, providerModel } from "./policies.js";
import {
  awsRegion,
  clientFormatOf,
  googleMethodOf,
  type ModelsRequest,
  modelForFormat,
  modelsRequest,
  modelsRequestOf,
  type ProviderCredentials,
  providerFormatFor,
  providerPath,
  providerRequest,
  routeTypeOf,
  sigV4Headers,
} from "./provider.js";
import {
  denialReply,
  endpointOf,
  type Peer,
  ProviderExtAuths,
  sourceVariable,
  withAllowedHeaders,
} from "./provider-ext-auth.js";
import { TokenLimiter } from "./token-limits.js";
import {
  checkRead,
  checkWrite,
  type ExtProcHeaders,
  type ExtProcRequest,
  type PhaseReply,
  type Reply,
  type ReplyHeaders,
  type ReplyMode,
  readProcessingRequest,
  replyMessage,
  WIRE_CHECK,
  writeReply,
} from "./wire.js";

type Obj = Record<string, unknown>;
/** What the router level answers a message with (nothing for messages it does not handle). */
type Answer = Reply | undefined;

const td = new TextDecoder();

/** The attempt the upstream stage prepared, for the router stage to read the response with. */
interface Attempt {
  readonly provider: string;
  readonly format?: ProviderFormat;
  readonly direction?: Direction;
  readonly meta?: RequestMeta;
  /** The upstream stage answered itself, already in the client's format. */
  readonly local?: boolean;
  /** The prompt guards of the provider that answers (its response guards apply). */
  readonly guards?: PromptGuardEntry;
  /** A model list in the family of this provider, to translate into the client's (models/list.ts). */
  readonly listing?: ListingAttempt;
}

/** A request's body after one set of request guards: the body to send (masked or not), or the rejection. */
type Guarded = { readonly body: Obj } | { readonly reject: GuardSpec };

interface RequestState {
  readonly entry: LlmRouteEntry;
  readonly routeType: RouteType;
  readonly client: ClientFormat | undefined;
  /** A model list request: its client's family and what it asks (the answer is translated when families differ). */
  readonly listing?: ModelsRequest;
  /** Served in one stage: the router level does the provider work (decided once, on the request headers). */
  readonly single: SingleStage | undefined;
  body?: Obj;
  /**
   * A route type forwarded as it is to a cloudA provider: its body, read only for SigV4's payload hash (empty when it
   * has none); undefined until read, and on other routes.
   */
  raw?: Uint8Array;
  /**
   * The path as the upstream stage sees it on the first attempt (after the route's URL rewrites), which a forwarded
   * request keeps (after the provider's base path) and a SigV4 signature covers.
   */
  upstreamPath?: string;
  /** Request headers, for CEL transformations. */
  headers: Record<string, string>;
  /** An InferencePool with FailOpen and no ready Pod (`namespace/name`): Envoy's 503 without a picker names it. */
  emptyPool?: string;
  /** The client's body as read, kept when a provider's extAuth forwards it (provider-ext-auth.ts). */
  clientBody?: Uint8Array;
  /** `jwt`, `apiKey`, `basicAuth`, `extauthz` for CEL, from the metadata the route forwards (empty when none). */
  readonly identity: Readonly<Record<string, unknown>>;
  /**
   * The identity as the current attempt's steps see it: with what its provider's extAuth told (`extauthz`), when that
   * check allowed with metadata; undefined otherwise (then `identity`). Set anew by every attempt.
   */
  checked?: Readonly<Record<string, unknown>> | undefined;
  /** What the current attempt's provider check told, laid over the route's `extauthz`, as JSON (dynamic metadata). */
  told?: JsonObject | undefined;
  /** An attempt left `told` in the dynamic metadata: a later attempt without it puts the route's back. */
  wroteTold?: boolean;
  /** The route's own extAuth's `extauthz`, as the dynamic metadata forwarded to the router stage had it. */
  readonly routeTold?: JsonObject;
  /** The client's connection (request attributes of the router stage), for a provider's extAuth check. */
  readonly peer?: Peer;
  /** A Realtime upgrade Envoy routes to Sluice's relay, which does the provider's work itself (realtime/relay.ts). */
  readonly relayed?: boolean;
  attempt?: Attempt;
  /**
   * Headers the previous attempt set: Envoy's upstream filters mutate the router's own request headers, so a retry to
   * another provider would otherwise carry the first provider's credentials.
   */
  provided?: readonly string[];
  /** The request header changes of the last attempt's transformation (xds/llm-transformation.ts), undone by the next. */
  transformed?: AttemptJournal;
  /**
   * The request guards' outcome per set of guards (by content): guards run once per client request, before its first
   * attempt; a retry to a provider with the same guards reuses the outcome.
   */
  guarded?: Map<string, Guarded | Promise<Guarded>>;
  /** GwModel routes: the model selected (router stage) and the outcome of each attempt (models/serve.ts). */
  model?: { readonly choice: ModelChoice; readonly attempts: ModelAttempts };
}

interface ResponseState {
  /** `listing`: a model list answer translated into the client's family (models/list.ts). */
  mode: "pass" | "error" | "buffered" | "stream" | "listing";
  status: number;
  headers: Record<string, string>;
  stream?: StreamTranslator;
  /** Response guards on the translated stream (`streaming: Enabled`). */
  guard?: StreamGuard;
  chunks: Uint8Array[];
}

export interface LlmServiceOptions {
  readonly log?: (line: string) => void;
  readonly now?: () => number;
  /** The client of a moderationA / guardrailsA / guardrailsB prompt guard (guards/remote), when served. */
  readonly remoteGuard?: GuardContext["remote"];
  /** cloudA credentials and cloudB tokens, given when shared with the remote guards (one cache each per process). */
  readonly aws?: AwsCredentialSource;
  readonly google?: GoogleTokens;
  /** The `tokens` buckets, given when shared with the Realtime relay, which debits its sessions' tokens from them. */
  readonly limiter?: TokenLimiter;
}

/** Key of a set of request guards, by content (the same policy on several providers gives the same key). */
const guardKeys = new WeakMap<readonly GuardSpec[], string>();
function guardKey(specs: readonly GuardSpec[]): string {
  let k = guardKeys.get(specs);
  if (k === undefined) {
    k = JSON.stringify(specs);
    guardKeys.set(specs, k);
  }
  return k;
}

/** A guard's CustomResponse, in the client's error format. */
function guardRejection(client: ClientFormat | undefined, spec: GuardSpec): Reply {
  const { statusCode, message } = spec.response;
  return clientErrorResponse(client, { status: statusCode, kind: kindForStatus(statusCode), message });
}

function header(h: ExtProcHeaders | undefined, name: string): string | undefined {
  for (const x of h?.headers?.headers ?? []) {
    if (x.key === name) return x.value !== "" ? x.value : td.decode(x.rawValue);
  }
  return undefined;
}

function headerMap(h: ExtProcHeaders | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const x of h?.headers?.headers ?? []) out[x.key] = x.value !== "" ? x.value : td.decode(x.rawValue);
  return out;
}

function attribute(req: ExtProcRequest, name: string): string | undefined {
  const v = req.attributes["envoy.filters.http.ext_proc"]?.[name];
  return typeof v === "string" ? v : undefined;
}

/**
 * The AI cluster Envoy routes to, as the table names it: a variant of it (another transformation for some routes,
 * xds/llm-transformation.ts) shares its entry.
 */
function clusterOf(req: ExtProcRequest): string | undefined {
  const name = attribute(req, LLM_CLUSTER_ATTRIBUTE);
  return name === undefined ? undefined : clusterVariantBase(name);
}

/**
 * One stage when the route's entry says so, or when the cluster Envoy routes to has no upstream stage (its metadata
 * names its one provider): Envoy applies a new cluster before the routes that go with it, so for a moment a route's
 * entry may still expect an upstream stage its cluster no longer has.
 */
function singleOf(entry: LlmRouteEntry, req: ExtProcRequest): SingleStage | undefined {
  if (entry.single !== undefined) return entry.single;
  const provider = attribute(req, LLM_SINGLE_PROVIDER_ATTRIBUTE);
  const cluster = clusterOf(req);
  return provider !== undefined && cluster !== undefined ? { cluster, provider } : undefined;
}

/**
 * Envoy's own 503 for a request to an InferencePool with FailOpen, no ready Pod and no answer from the picker (its
 * ORIGINAL_DST cluster had no address): the message names the pool. Any other error body stays as it is.
 */
function emptyPoolText(state: RequestState | undefined, status: number, text: string): string {
  if (state?.emptyPool === undefined || status !== 503 || (text !== "" && text !== "no healthy upstream")) return text;
  return `InferencePool ${state.emptyPool}: its endpoint picker did not answer and the pool has no ready Pod to go on to (FailOpen)`;
}

function mutation(set: Readonly<Record<string, string>>, remove: readonly string[] = []): ReplyHeaders {
  return remove.length > 0 ? { set, remove } : { set };
}

function respond(
  phase: PhaseReply["phase"],
  change: Pick<PhaseReply, "replace" | "headers" | "body"> = {},
  extra: { modeOverride?: ReplyMode; metadata?: JsonObject } = {},
): PhaseReply {
  return {
    phase,
    ...change,
    ...(extra.modeOverride !== undefined ? { modeOverride: extra.modeOverride } : {}),
    ...(extra.metadata !== undefined ? { metadata: extra.metadata } : {}),
  };
}

function immediate(status: number, body: JsonObject | string, contentType = "application/json"): Reply {
  return {
    phase: "immediate",
    status,
    headers: mutation({ "content-type": contentType }),
    body: typeof body === "string" ? body : JSON.stringify(body),
    details: "sluice_llm",
  };
}

/** An error the client sees in its own format (chat-completions style when the route is not an LLM format). */
function clientErrorResponse(client: ClientFormat | undefined, error: LlmError): Reply {
  const e = clientError(client ?? "chat-completions", error);
  return immediate(e.status, e.body);
}

/** The provider's request of an attempt: the header mutation and, for translated route types, the body. */
interface ProviderMutation {
  readonly set: Readonly<Record<string, string>>;
  readonly remove: readonly string[];
  readonly body?: string;
  /** Dynamic metadata the attempt leaves for the filters after it (a provider's extAuth's `extauthz`). */
  readonly metadata?: JsonObject;
}

/** The provider work's outcome: the provider's request, or the error the client gets instead (in its own format). */
type ProviderWork = ProviderMutation | { readonly error: Reply };

/** The answer that sends the provider's request (`also`: more headers to set), or the error instead of it. */
function providerResponse(
  phase: "requestHeaders" | "requestBody",
  w: ProviderWork,
  extra: {
    also?: Readonly<Record<string, string>>;
    modeOverride?: ReplyMode;
    metadata?: JsonObject;
  } = {},
): Reply {
  if ("error" in w) return w.error;
  const { also, ...rest } = extra;
  const metadata = w.metadata === undefined ? rest.metadata : { ...rest.metadata, ...w.metadata };
  return respond(
    phase,
    {
      headers: mutation({ ...w.set, ...also }, w.remove),
      ...(w.body !== undefined ? { replace: true, body: w.body } : {}),
    },
    { ...rest, ...(metadata !== undefined ? { metadata } : {}) },
  );
}

/** `f` of `v`: now when `v` is a value, once it settles when it is a promise (synchronous work stays synchronous). */
function andThen<T, U>(v: T | Promise<T>, f: (t: T) => U): U | Promise<U> {
  return v instanceof Promise ? v.then(f) : f(v);
}

const ROUTER_MODE = {
  requestHeaderMode: ProcessingMode_HeaderSendMode.SEND,
  requestBodyMode: ProcessingMode_BodySendMode.BUFFERED,
  responseHeaderMode: ProcessingMode_HeaderSendMode.SEND,
  requestTrailerMode: ProcessingMode_HeaderSendMode.SKIP,
  responseTrailerMode: ProcessingMode_HeaderSendMode.SKIP,
} as const;
const bodyMode = (
  response: ProcessingMode_BodySendMode,
  request: ProcessingMode_BodySendMode = ProcessingMode_BodySendMode.BUFFERED,
): ReplyMode => ({
  ...ROUTER_MODE,
  requestBodyMode: request,
  responseBodyMode: response,
});

function concat(chunks: readonly Uint8Array[]): Uint8Array {
  if (chunks.length === 1 && chunks[0] !== undefined) return chunks[0];
  const out = new Uint8Array(chunks.reduce((n, c) => n + c.byteLength, 0));
  let o = 0;
  for (const c of chunks) {
    out.set(c, o);
    o += c.byteLength;
  }
  return out;
}

/** Headers a client may send to authenticate with the gateway; they never go to a provider. */
const CLIENT_CREDENTIAL_HEADERS = ["authorization", "x-api-key", "api-key", "x-goog-api-key"];

/** What the handlers use of a Process call, on grpc-js or on the hot-path server. */
interface ExtProcCall {
  on(event: "data", fn: (req: ExtProcRequest) => void): void;
  on(event: "end", fn: () => void): void;
  on(event: "error", fn: (e: Error) => void): void;
  write(r: Reply): void;
  end(): void;
}

export class LlmExtProcService {
  readonly name = "llm-ext-proc";
  #current = new Map<string, LlmRouteEntry>();
  /** The previous table stays readable so requests of an Envoy not yet updated keep working. */
  #previous = new Map<string, LlmRouteEntry>();
  readonly #requests = new Map<string, RequestState>();
  readonly #limiter: TokenLimiter;
  readonly #google: GoogleTokens;
  readonly #aws: AwsCredentialSource;
  readonly #minter: Minter;
  readonly #log: (line: string) => void;
  readonly #remoteGuard: GuardContext["remote"];
  readonly #modelHealth: ModelHealth;
  readonly #now: () => number;
  /** GwPolicies' extAuth for one provider, checked per attempt. */
  readonly #providerAuthz: ProviderExtAuths;
  /** The ready Pods of each InferencePool with FailOpen (LlmTable `pools`), and the next one's index per pool. */
  #pools: ReadonlyMap<string, readonly string[]> = new Map();
  readonly #poolTurns = new Map<string, number>();

  constructor(opts: LlmServiceOptions = {}) {
    this.#remoteGuard = opts.remoteGuard;
    this.#limiter = opts.limiter ?? new TokenLimiter(opts.now);
    this.#google = opts.google ?? new GoogleTokens(opts.now !== undefined ? { now: opts.now } : {});
    this.#aws = opts.aws ?? new AwsCredentialSource(opts.now !== undefined ? { now: opts.now } : {});
    // Its own minter (the credential service's forgets the caches of plans it does not serve), sharing the sources.
    this.#minter = new Minter({
      aws: this.#aws,
      google: this.#google,
      ...(opts.now !== undefined ? { now: opts.now } : {}),
    });
    this.#log = opts.log ?? (() => {});
    this.#now = opts.now ?? Date.now;
    this.#modelHealth = new ModelHealth(this.#now);
    this.#providerAuthz = new ProviderExtAuths(this.#log);
  }

  close(): void {
    this.#providerAuthz.close();
  }

  update(result: TranslationResult): void {
    this.#previous = this.#current;
    this.#current = new Map(result.llm.entries);
    this.#pools = result.llm.pools;
    for (const name of this.#poolTurns.keys()) if (!this.#pools.has(name)) this.#poolTurns.delete(name);
    // Token exchange caches of plans no longer in the table (nor the previous one) are dropped; extAuth caches too.
    const ids = new Set<string>();
    const extAuths: ProviderExtAuthConfig[] = [];
    for (const table of [this.#current, this.#previous]) {
      for (const e of table.values()) {
        for (const b of Object.values(e.backends)) {
          for (const p of Object.values(b.providers)) {
            if (p.auth.minted !== undefined) ids.add(p.auth.minted.id);
            if (p.extAuth !== undefined) extAuths.push(p.extAuth);
          }
        }
      }
    }
    this.#minter.retain(ids);
    this.#providerAuthz.retain(extAuths);
  }

  /** On grpc-js (the ADS port): kept for Envoys bootstrapped to call ext_proc on `sluice_services`. */
  addTo(server: grpc.Server): void {
    addGrpcService(server, ExternalProcessor, {
      process: (call) => {
        const meta = (key: string) => {
          const v = call.metadata.get(key)[0];
          return v === undefined ? undefined : String(v);
        };
        this.#process(
          {
            on: call.on.bind(call) as ExtProcCall["on"],
            write: (r) => call.write(replyMessage(r)),
            end: () => call.end(),
          },
          meta,
        );
      },
    });
  }

  /** The Process method for the hot-path gRPC server (src/grpc/unary-server.ts), which Envoy is pointed at. */
  get bidi(): ReadonlyMap<string, BidiHandler> {
    this.#bidi ??= this.#bidiHandlers();
    return this.#bidi;
  }

  #bidi: ReadonlyMap<string, BidiHandler> | undefined;

  #bidiHandlers(): ReadonlyMap<string, BidiHandler> {
    const handler: BidiHandler = (raw) => {
      const call: ExtProcCall = {
        on: ((event: "data" | "end" | "error", fn: (arg: never) => void) => {
          if (event !== "data") {
            raw.on(event as "end", fn as () => void);
            return;
          }
          raw.on("data", (bytes) => {
            let req: ExtProcRequest;
            try {
              req = readProcessingRequest(bytes);
              if (WIRE_CHECK) checkRead(bytes, req);
            } catch (e) {
              this.#log(`llm ext_proc: undecodable message: ${(e as Error).message}`);
              raw.end();
              return;
            }
            (fn as (r: ExtProcRequest) => void)(req);
          });
        }) as ExtProcCall["on"],
        write: (r) => {
          const bytes = writeReply(r);
          if (WIRE_CHECK) checkWrite(r, bytes);
          raw.write(bytes);
        },
        end: () => raw.end(),
      };
      this.#process(call, (key) => {
        const v = raw.headers[key];
        return typeof v === "string" ? v : undefined;
      });
    };
    return new Map([[`/${ExternalProcessor.typeName}/Process`, handler]]);
  }

  #process(call: ExtProcCall, meta: (key: string) => string | undefined): void {
    const stage = meta(LLM_STAGE_METADATA);
    // The same ext_proc service serves GwPolicy transformations (src/extproc/transformation.ts).
    if (stage === TRANSFORMATION_STAGE) {
      serveTransformation(call, decodeTransformation(meta(TRANSFORMATION_METADATA) ?? ""), this.#log, (h) =>
        this.#transformationAttempt(h),
      );
      return;
    }
    // And values later filters read, computed with CEL per request (src/extproc/context.ts).
    if (stage === CONTEXT_STAGE) {
      serveContext(call, decodeContext(meta(CONTEXT_METADATA) ?? ""), this.#log);
      return;
    }
    // And the agent cards of GwBackend a2a (src/a2a/agent-card.ts).
    if (stage === A2A_STAGE) {
      serveA2a(call, this.#log);
      return;
    }
    if (stage === "upstream") this.#upstream(call);
    else this.#router(call, meta(LLM_ENTRY_METADATA) ?? "");
  }

  /**
   * An AI cluster's transformation (an upstream filter after the LLM one): the request it belongs to, where the changes
   * of its previous attempt are kept, and the headers the LLM stage set for this attempt.
   */
  #transformationAttempt(h: Readonly<Record<string, string>>): AttemptState | undefined {
    const id = h[LLM_REQUEST_ID_HEADER];
    const state = id === undefined ? undefined : this.#requests.get(id);
    if (state === undefined) return undefined;
    state.transformed ??= new Map();
    const extauthz = state.checked?.["extauthz"];
    return {
      journal: state.transformed,
      provided: new Set(state.provided ?? []),
      ...(extauthz !== undefined ? { extauthz } : {}),
    };
  }

  /** Number of requests held in memory (tests check it drains). */
  get inFlight(): number {
    return this.#requests.size;
  }

  #entry(id: string): LlmRouteEntry | undefined {
    return this.#current.get(id) ?? this.#previous.get(id);
  }

  // ---- router level ----

  #router(call: ExtProcCall, entryId: string): void {
    let id: string | undefined;
    let state: RequestState | undefined;
    const resp: ResponseState = { mode: "pass", status: 0, headers: {}, chunks: [] };
    let closed = false;
    // Whether the exchange reached its last answer; a stream that ends before (client gone, stream reset) is counted.
    let over = false;
    // An answer still being prepared (the provider work waits for a Google token): the messages after it wait too,
    // so answers go out in the order Envoy expects them.
    let pending: Promise<void> | undefined;
    const forget = () => {
      closed = true;
      if (!over) llmAborted(state);
      if (id !== undefined) this.#requests.delete(id);
    };
    const close = () => {
      if (closed) return;
      forget();
      call.end();
    };
    const answer = (req: ExtProcRequest, out: Answer) => {
      if (closed || out === undefined) return;
      call.write(out);
      // Close our side once the exchange is over: the stream ends with our trailers rather than Envoy's reset when the
      // HTTP request ends (on grpc-js, a burst of such resets trips nghttp2's rapid-reset protection).
      if (isLast(req, out)) {
        over = true;
        close();
      }
    };
    const fail = (e: unknown) => {
      if (closed) return;
      // A bug, not input: answer in the client's format rather than leaving Envoy waiting.
      this.#log(`llm ext_proc: ${(e as Error).message}`);
      llmFailed(state, 500);
      call.write(clientErrorResponse(errorFormat(state), { status: 500, kind: "server", message: "gateway error" }));
      close();
    };
    const handle = (req: ExtProcRequest): Promise<void> | undefined => {
      let out: Answer | Promise<Answer>;
      try {
        out = this.#routerMessage(
          req,
          entryId,
          resp,
          () => state,
          (s, i) => {
            state = s;
            id = i;
            llmStarted(s);
          },
        );
      } catch (e) {
        fail(e);
        return undefined;
      }
      if (!(out instanceof Promise)) {
        answer(req, out);
        return undefined;
      }
      return out.then((o) => answer(req, o)).catch(fail);
    };
    call.on("error", forget);
    call.on("end", () => {
      if (pending === undefined) close();
      else void pending.then(close);
    });
    call.on("data", (req: ExtProcRequest) => {
      const next = pending === undefined ? handle(req) : pending.then(() => handle(req));
      pending = next;
      void next?.then(() => {
        if (pending === next) pending = undefined;
      });
    });
  }

  #routerMessage(
    req: ExtProcRequest,
    entryId: string,
    resp: ResponseState,
    get: () => RequestState | undefined,
    set: (s: RequestState, id: string) => void,
  ): Answer | Promise<Answer> {
    const r = req.request;
    switch (r.case) {
      case "requestHeaders": {
        const entry = this.#entry(entryId);
        if (entry === undefined) {
          return clientErrorResponse(undefined, { status: 500, kind: "server", message: "unknown LLM route policy" });
        }
        const typed = routeTypeOf(entry.routes, header(r.value, ":path") ?? "/");
        const headers = headerMap(r.value);
        // A model list request (a Models route, or a GET of `.../models[/{id}]` on a Completions route) is forwarded
        // without its body and its answer translated into the client's family (models/list.ts).
        const listing = modelsRequestOf(typed, headers);
        const routeType: RouteType = listing !== undefined ? "Models" : typed;
        const client = listing !== undefined ? undefined : clientFormatOf(routeType, header(r.value, ":path") ?? "/");
        // A websocket upgrade on a route that serves Realtime, to a path of a route type with a body to translate, would
        // wait for a body that never comes: refused, naming what takes websockets.
        if (client !== undefined && /websocket/i.test(header(r.value, "upgrade") ?? "")) {
          return clientErrorResponse(client, {
            status: 400,
            kind: "invalid_request",
            message: `a websocket upgrade to a ${routeType} path: only paths the AI policy's routes name Realtime take websockets`,
          });
        }
        if (entry.models !== undefined) {
          // GwModel discovery is answered here; other model requests need their body to select a model.
          if (listing !== undefined) {
            const d = discoveryAnswer(entry.models, listing);
            return d.ok ? immediate(200, d.body) : clientErrorResponse(LIST_ERROR_FORMAT[listing.client], d.error);
          }
          if (r.value.endOfStream) {
            return clientErrorResponse(client, {
              status: 400,
              kind: "invalid_request",
              message: "request body must be a JSON object",
            });
          }
        }
        if (entry.tokenLimits.length > 0 && !this.#limiter.admit(entry.tokenLimits)) {
          return clientErrorResponse(
            client ?? (listing !== undefined ? LIST_ERROR_FORMAT[listing.client] : undefined),
            { status: 429, kind: "rate_limit", message: "token rate limit exceeded" },
          );
        }
        const id = randomUUID();
        const peer = peerOf(req);
        const routeTold = routeToldOf(req);
        const state: RequestState = {
          entry,
          routeType,
          client,
          ...(listing !== undefined ? { listing } : {}),
          single: entry.models !== undefined ? undefined : singleOf(entry, req),
          headers,
          identity: identityVariables(req.metadataContext?.filterMetadata),
          ...(routeTold !== undefined ? { routeTold } : {}),
          ...(peer !== undefined ? { peer } : {}),
          ...(routeType === "Realtime" && attribute(req, LLM_CLUSTER_ATTRIBUTE) === SLUICE_AUTHZ_HTTP_CLUSTER
            ? { relayed: true }
            : {}),
        };
        this.#requests.set(id, state);
        set(state, id);
        const also = { [LLM_REQUEST_ID_HEADER]: id };
        const fallback = state.relayed === true ? undefined : this.#poolFallback(state, req);
        // Route types forwarded as they are need no body here: it streams (a Realtime websocket never ends). To a
        // cloudA provider it is read all the same, for SigV4's payload hash (a websocket is refused: see #provide), and
        // for a provider's extAuth that forwards the body (forwardBody).
        const readsBody =
          client === undefined &&
          routeType !== "Realtime" &&
          (hasAwsProvider(entry, state.single) || forwardsBody(entry));
        if (readsBody && r.value.endOfStream) state.raw = new Uint8Array();
        const extra =
          client === undefined && !readsBody
            ? { modeOverride: bodyMode(ProcessingMode_BodySendMode.BUFFERED, ProcessingMode_BodySendMode.NONE) }
            : {};
        const single = state.single;
        // An upgrade to Sluice's Realtime relay: the relay does the provider's work (credentials, extAuth) itself.
        if (
          single !== undefined &&
          state.relayed !== true &&
          ((client === undefined && !readsBody) || r.value.endOfStream)
        ) {
          // One stage, and no body to translate: the provider's destination and credentials are set now.
          return andThen(this.#providerWork(state, single.provider, single.cluster), (w) =>
            providerResponse("requestHeaders", w, { also, ...extra, ...fallback }),
          );
        }
        // A client never chooses a model's cluster: the header is the ext_proc's alone.
        const remove = entry.models !== undefined ? [MODEL_CLUSTER_HEADER] : [];
        return respond("requestHeaders", { headers: mutation(also, remove) }, { ...extra, ...fallback });
      }
      case "requestBody": {
        const state = get();
        if (state?.client === undefined) {
          // A body forwarded as it is reaches here only to be signed (to a cloudA provider).
          if (state === undefined) return respond("requestBody");
          state.raw = r.value.body;
          if (forwardsBody(state.entry)) state.clientBody = r.value.body;
          const single = state.single;
          if (single === undefined) return respond("requestBody");
          return andThen(this.#providerWork(state, single.provider, single.cluster), (w) =>
            providerResponse("requestBody", w),
          );
        }
        let parsed: unknown;
        try {
          parsed = JSON.parse(td.decode(r.value.body));
        } catch {
          parsed = undefined;
        }
        if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
          return clientErrorResponse(state.client, {
            status: 400,
            kind: "invalid_request",
            message: "request body must be a JSON object",
          });
        }
        state.body = parsed as Obj;
        if (forwardsBody(state.entry)) state.clientBody = r.value.body;
        if (
          state.client === "generate-content" ||
          state.client === "generate-content-count-tokens" ||
          state.client === "embed-content" ||
          state.client === "batch-embed-contents"
        ) {
          // Google's clients name the model and streaming in the URL: read into the body's usual fields (the
          // translators take them out again), so policies, CEL and GwModels see them as for every format.
          const g = googleMethodOf(state.headers[":path"] ?? "");
          if (g !== undefined) state.body = { ...state.body, model: g.model, stream: g.stream };
        }
        // Known from here on, for rate limit descriptors after this filter that read llm.requestModel/streaming.
        const model = state.body.model;
        const metadata = {
          [LLM_METADATA_NAMESPACE]: {
            ...(typeof model === "string" ? { [LLM_METADATA_KEYS.requestModel]: model } : {}),
            [LLM_METADATA_KEYS.streaming]: state.body.stream === true,
          },
        };
        if (state.entry.models !== undefined) return this.#selectModel(state, state.entry.models, metadata);
        const single = state.single;
        if (single === undefined) return respond("requestBody", {}, { metadata });
        // One stage: the provider's request (headers and translated body) replaces the client's here. Envoy's router
        // reads the new path and authority after this filter; the route stays the one already selected.
        return andThen(this.#providerWork(state, single.provider, single.cluster), (w) =>
          providerResponse("requestBody", w, { metadata }),
        );
      }
      case "responseHeaders":
        return this.#responseHeaders(get(), r.value, resp);
      case "responseBody":
        return this.#responseBody(get(), r.value.body, r.value.endOfStream, resp);
      default:
        return undefined;
    }
  }

  /**
   * To an InferencePool with FailOpen: one of its ready Pods, in turn, where the pool's picker writes its choice
   * (`envoy.lb`), so a request the picker does not answer still has an endpoint; the picker's filter comes after this
   * one and its answer replaces the value. None for other clusters; a pool without a ready Pod is remembered for the
   * error.
   */
  #poolFallback(state: RequestState, req: ExtProcRequest): { metadata: JsonObject } | undefined {
    const cluster = state.single?.cluster ?? clusterOf(req);
    const pool = cluster === undefined ? undefined : state.entry.backends[cluster]?.failOpenPool;
    if (pool === undefined) return undefined;
    const pods = this.#pools.get(pool) ?? [];
    if (pods.length === 0) {
      state.emptyPool = pool;
      return undefined;
    }
    const turn = this.#poolTurns.get(pool) ?? 0;
    this.#poolTurns.set(pool, (turn + 1) % pods.length);
    const pod = pods[turn % pods.length] as string;
    return { metadata: { [PICKED_ENDPOINT_METADATA.namespace]: { [PICKED_ENDPOINT_METADATA.key]: pod } } };
  }

  #responseHeaders(state: RequestState | undefined, h: ExtProcHeaders, resp: ResponseState): Reply {
    resp.status = Number(header(h, ":status") ?? "0");
    resp.headers = headerMap(h);
    const changes = this.#modelResponse(state, resp.status, resp.headers);
    const reply = this.#responseHeadersReply(state, h, resp);
    return changes === undefined || reply.phase === "immediate" ? reply : withHeaderChanges(reply, changes);
  }

  #responseHeadersReply(state: RequestState | undefined, h: ExtProcHeaders, resp: ResponseState): Reply {
    const attempt = state?.attempt;
    if (attempt?.listing !== undefined && attempt.local !== true) {
      resp.mode = "listing";
      if (h.endOfStream) {
        // No body will follow (Envoy's own reply, a rate limit filter after this one): the answer is made here.
        const a = listingAnswer(attempt.listing, resp.status, "", resp.headers);
        return respond("responseHeaders", {
          replace: true,
          headers: mutation(listingHeaders(a.body, a.status !== resp.status ? a.status : undefined)),
          body: JSON.stringify(a.body),
        });
      }
      return respond(
        "responseHeaders",
        { headers: mutation({ "content-type": "application/json" }, ["content-length"]) },
        { modeOverride: bodyMode(ProcessingMode_BodySendMode.BUFFERED, ProcessingMode_BodySendMode.NONE) },
      );
    }
    if (state?.client === undefined || attempt?.local === true) {
      // Passthrough route types, and errors the upstream stage already wrote in the client's format.
      resp.mode = state?.routeType === "Detect" ? "buffered" : "pass";
      return respond(
        "responseHeaders",
        {},
        {
          modeOverride: bodyMode(
            resp.mode === "pass" ? ProcessingMode_BodySendMode.NONE : ProcessingMode_BodySendMode.BUFFERED,
            state?.client === undefined ? ProcessingMode_BodySendMode.NONE : ProcessingMode_BodySendMode.BUFFERED,
          ),
        },
      );
    }
    if (resp.status >= 400 || attempt?.direction === undefined || attempt.meta === undefined) {
      // Provider errors, and Envoy's own replies when no provider could be reached.
      resp.mode = "error";
      if (h.endOfStream) {
        // No body will follow (a 429 of a rate limit filter after this one ...): the error body is added here.
        const e = translateError(state.client, resp.status, emptyPoolText(state, resp.status, ""), resp.headers);
        const text = JSON.stringify(e.body);
        const set: Record<string, string> = {
          "content-type": "application/json",
          "content-length": String(Buffer.byteLength(text)),
        };
        if (e.status !== resp.status) set[":status"] = String(e.status);
        return respond("responseHeaders", { replace: true, headers: mutation(set), body: text });
      }
      return respond("responseHeaders", {
        headers: mutation({ "content-type": "application/json" }, ["content-length"]),
      });
    }
    if (attempt.meta.stream && attempt.direction.stream !== undefined) {
      resp.mode = "stream";
      resp.stream = attempt.direction.stream(attempt.meta, defaultContext);
      const guards = attempt.guards;
      if (guards?.streaming === true && StreamGuard.applies(guards.response)) {
        resp.guard = new StreamGuard(state.client, guards.response, this.#guardContext(state, attempt.provider));
      }
      return respond(
        "responseHeaders",
        {
          headers: mutation({ "content-type": "text/event-stream", "cache-control": "no-cache" }, ["content-length"]),
        },
        {
          modeOverride: bodyMode(ProcessingMode_BodySendMode.STREAMED),
          // Known now, for filters that read it before the stream ends (a user processor's response attributes).
          metadata: { [LLM_METADATA_NAMESPACE]: { provider: attempt.provider } },
        },
      );
    }
    resp.mode = "buffered";
    return respond("responseHeaders", {
      headers: mutation({ "content-type": "application/json" }, ["content-length"]),
    });
  }

  #responseBody(
    state: RequestState | undefined,
    chunk: Uint8Array,
    end: boolean,
    resp: ResponseState,
  ): Reply | Promise<Reply> {
    const attempt = state?.attempt;
    const client = state?.client ?? "chat-completions";
    if (resp.mode === "stream" && resp.stream !== undefined) {
      llmChunk(state);
      let out = resp.stream.push(chunk);
      let metadata: JsonObject | undefined;
      if (end) {
        const tail = resp.stream.end();
        out = concat([out, tail]);
        // A stream that ended with an error event (a broken or erroring upstream) counts as failed, its usage still
        // charged; the log leaves out the parser's detail, which quotes the provider's text.
        const failure = resp.stream.failure();
        if (failure !== undefined) {
          this.#log(
            `llm provider ${attempt?.provider}: stream ended with an error event: ${failure.message.split(":")[0]}`,
          );
          llmFailed(state, failure.status);
        }
        metadata = this.#complete(state, resp.stream.usage(), attempt?.meta?.model, failure !== undefined);
      }
      const extra = metadata !== undefined ? { metadata } : {};
      // Webhook and remote guards answer asynchronously: the chunk goes out when they have (guards/stream.ts).
      const guarded = resp.guard?.push(out, end) ?? out;
      if (guarded instanceof Promise) return guarded.then((body) => respond("responseBody", { body }, extra));
      return respond("responseBody", { body: guarded }, extra);
    }
    // Buffered: Envoy sends the whole body once (end of stream).
    const text = td.decode(chunk);
    if (resp.mode === "pass") return respond("responseBody");
    if (resp.mode === "listing" && attempt?.listing !== undefined) {
      const a = listingAnswer(attempt.listing, resp.status, text, resp.headers);
      if (a.truncated === true) {
        this.#log(
          `llm provider ${attempt.provider}: its model list has more than one page of 1000; the rest is not listed`,
        );
      }
      return this.#replaceBody(a.body, a.status !== resp.status ? a.status : undefined);
    }
    if (resp.mode === "buffered" && state?.client === undefined) {
      // Detect: read usage from whatever format came back.
      let usage: TokenUsage | undefined;
      try {
        const json = JSON.parse(text) as unknown;
        usage = extractUsage("chat-completions", json) ?? extractUsage("messages", json);
      } catch {
        usage = undefined;
      }
      const metadata = this.#complete(state, usage, undefined);
      return respond("responseBody", {}, metadata !== undefined ? { metadata } : {});
    }
    if (resp.mode === "error") {
      llmFailed(state, resp.status);
      const e = translateError(client, resp.status, emptyPoolText(state, resp.status, text), resp.headers);
      return this.#replaceBody(e.body, e.status !== resp.status ? e.status : undefined);
    }
    // Translate a successful, non-streamed response.
    if (attempt?.direction === undefined || attempt.meta === undefined) return respond("responseBody");
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    const r = attempt.direction.response(parsed, attempt.meta, defaultContext);
    if (!r.ok) {
      const e = clientError(client, r.error);
      return this.#replaceBody(e.body, e.status);
    }
    const reported = (r.body as { model?: unknown }).model;
    const metadata = this.#complete(state, r.usage, typeof reported === "string" ? reported : attempt.meta.model);
    const guards = attempt.guards?.response;
    if (state === undefined || guards === undefined || guards.length === 0) {
      return this.#replaceBody(r.body, undefined, metadata);
    }
    // Response guards read the answer in the client's format; a mask is written back in place.
    const slots = responseSlots(client, r.body);
    const done = (o: GuardOutcome): Reply => {
      if (o.action === "reject") {
        const e = clientError(client, {
          status: o.guard.response.statusCode,
          kind: kindForStatus(o.guard.response.statusCode),
          message: o.guard.response.message,
        });
        return this.#replaceBody(e.body, e.status, metadata);
      }
      if (o.action === "mask") slots.write(o.texts);
      return this.#replaceBody(r.body, undefined, metadata);
    };
    const o = runGuards("response", guards, slots.texts(), this.#guardContext(state, attempt.provider));
    return o instanceof Promise ? o.then(done) : done(o);
  }

  #replaceBody(body: JsonObject | object, status?: number, metadata?: JsonObject): Reply {
    const text = JSON.stringify(body);
    const set: Record<string, string> = { "content-length": String(Buffer.byteLength(text)) };
    if (status !== undefined) set[":status"] = String(status);
    return respond("responseBody", { headers: mutation(set), body: text }, metadata !== undefined ? { metadata } : {});
  }

  /**
   * A response is complete: debit the `tokens` limits, and give the dynamic metadata (counts, models, provider, the
   * route's token costs) that access logs and the rate limit filter read.
   */
  #complete(
    state: RequestState | undefined,
    usage: TokenUsage | undefined,
    responseModel: string | undefined,
    failed = false,
  ): JsonObject | undefined {
    if (state === undefined) return undefined;
    // Counting tokens uses none: the count is reported as such, not as input tokens.
    const counting =
      (state.client === "count-tokens" || state.client === "generate-content-count-tokens") && usage !== undefined;
    const used = counting ? undefined : usage;
    if (!failed) llmCompleted(state, used, responseModel);
    if (used !== undefined && state.entry.tokenLimits.length > 0) {
      this.#limiter.consume(state.entry.tokenLimits, used.totalTokens);
    }
    const model = state.body?.model;
    const completion: Completion = {
      streaming: state.body?.stream === true,
      ...(state.attempt !== undefined ? { provider: state.attempt.provider } : {}),
      ...(typeof model === "string" ? { requestModel: model } : {}),
      ...(responseModel !== undefined ? { responseModel } : {}),
      ...(used !== undefined ? { usage: used } : {}),
      ...(counting ? { countTokens: usage.inputTokens } : {}),
    };
    return completionMetadata(
      completion,
      state.entry.tokenCosts,
      state.headers,
      (expr) => this.#log(`llm cost expression ${JSON.stringify(expr)} failed; counting total tokens`),
      identityOf(state),
    );
  }

  // ---- upstream (per attempt) ----

  #upstream(call: ExtProcCall): void {
    call.on("error", () => {});
    call.on("end", () => call.end());
    call.on("data", (req: ExtProcRequest) => {
      if (req.request.case !== "requestHeaders") return;
      const h = req.request.value;
      Promise.resolve()
        .then(() => this.#attempt(req, h))
        .catch((e: unknown) => {
          this.#log(`llm ext_proc (upstream): ${(e as Error).message}`);
          return clientErrorResponse(undefined, { status: 500, kind: "server", message: "gateway error" });
        })
        .then((out) => {
          call.write(out);
          // This processor sees request headers only: the exchange is over (see #router on why ending matters).
          call.end();
        });
    });
  }

  #attempt(req: ExtProcRequest, h: ExtProcHeaders): Reply | Promise<Reply> {
    const id = header(h, LLM_REQUEST_ID_HEADER);
    const state = id === undefined ? undefined : this.#requests.get(id);
    if (state === undefined) {
      return clientErrorResponse(undefined, { status: 500, kind: "server", message: "LLM request state not found" });
    }
    // Served in one stage: the router level did the provider work. The cluster keeps this stage for other routes
    // (or for this route's previous table entry, while Envoy changes configuration).
    if (state.single !== undefined) return respond("requestHeaders");
    // The first attempt's: a retry's carries what the previous attempt set (another provider's path, a base path).
    const upstreamPath = header(h, ":path");
    if (state.upstreamPath === undefined && upstreamPath !== undefined) state.upstreamPath = upstreamPath;
    const cluster = clusterOf(req) ?? "";
    // The endpoint's metadata names its provider; an endpoint without any (ORIGINAL_DST, where an InferencePool's
    // picker chose the address) is the cluster's one provider.
    const providers = Object.keys(state.entry.backends[cluster]?.providers ?? {});
    const provider = attribute(req, LLM_PROVIDER_ATTRIBUTE) ?? (providers.length === 1 ? providers[0] : undefined);
    const work = this.#providerWork(state, provider ?? "", cluster);
    return andThen(work, (w) => providerResponse("requestHeaders", w));
  }

  // ---- the provider work, for either stage ----

  /**
   * One attempt's provider work for `providerName` of `cluster`: obtains its credentials, then (#provide) applies its AI
   * policy, translates and sets the destination. Synchronous, except while a Google token (cloudB) or AWS credentials
   * other than a Secret's keys (cloudA) are obtained.
   */
  #providerWork(state: RequestState, providerName: string, cluster: string): ProviderWork | Promise<ProviderWork> {
    const target = this.#modelTarget(state, cluster, providerName);
    if (target !== undefined && "error" in target) {
      state.attempt = { provider: providerName, local: true };
      return { error: clientErrorResponse(errorFormat(state), target.error) };
    }
    const work = this.#providerWorkOf(state, target?.provider, providerName, cluster);
    const changes = target?.headers;
    return changes === undefined ? work : andThen(work, (w) => withRequestHeaders(w, changes));
  }

  #providerWorkOf(
    state: RequestState,
    modelProvider: LlmProviderEntry | undefined,
    providerName: string,
    cluster: string,
  ): ProviderWork | Promise<ProviderWork> {
    const provider = modelProvider ?? state.entry.backends[cluster]?.providers[providerName];
    const fail = (error: LlmError): ProviderWork => {
      state.attempt = { provider: providerName, local: true };
      return { error: clientErrorResponse(errorFormat(state), error) };
    };
    const unavailable = (why: string) => {
      this.#log(`llm provider ${providerName}: ${why}`);
      return fail({
        status: 500,
        kind: "server",
        message: `credentials of provider ${providerName} are not available`,
      });
    };
    if (provider === undefined) {
      return fail({ status: 500, kind: "server", message: `provider ${providerName} of ${cluster} is not configured` });
    }
    const problems = provider.auth.problems ?? [];
    if (problems.length > 0) return unavailable(problems.map((p) => p.message).join("; "));
    const work = (): ProviderWork | Promise<ProviderWork> => {
      const guarded = this.#guardRequest(state, provider);
      const go = (g: Guarded | undefined): ProviderWork | Promise<ProviderWork> => {
        if (g !== undefined && "reject" in g) {
          state.attempt = { provider: providerName, local: true };
          return { error: guardRejection(state.client, g.reject) };
        }
        const w = this.#obtain(state, provider, g?.body, fail, unavailable);
        return w instanceof Promise
          ? w.then((x) => this.#withMinted(state, provider, x, fail))
          : this.#withMinted(state, provider, w, fail);
      };
      return guarded instanceof Promise ? guarded.then(go) : go(guarded);
    };
    // Each attempt's steps see its own provider's check, not a previous attempt's.
    state.checked = undefined;
    state.told = undefined;
    const w = provider.extAuth === undefined ? work() : this.#authorized(state, provider, provider.extAuth, work);
    return andThen(w, (x) => withTold(state, x));
  }

  /**
   * A GwPolicy's extAuth for `provider`, on the client's request, before the provider work: allowed, the work with the
   * service's headers; denied, the denial in the client's format, final (an upstream filter's local reply is the
   * downstream's, which Envoy's router does not retry: docs/llm.md).
   */
  async #authorized(
    state: RequestState,
    provider: LlmProviderEntry,
    extAuth: ProviderExtAuthConfig,
    work: () => ProviderWork | Promise<ProviderWork>,
  ): Promise<ProviderWork> {
    const source = sourceVariable(state.peer);
    const d = await this.#providerAuthz.check(extAuth, {
      headers: state.headers,
      ...(state.clientBody !== undefined ? { body: state.clientBody } : {}),
      activation: { ...celVariables(state, provider.name), ...(source !== undefined ? { source } : {}) },
      ...(state.peer !== undefined ? { peer: state.peer } : {}),
    });
    if ("deny" in d) {
      state.attempt = { provider: provider.name, local: true };
      return { error: denialReply(errorFormat(state), provider.name, d.deny) };
    }
    // What the service told is `extauthz` for what follows on this attempt: the provider's AI policy, its prompt
    // guards, its transformation (the upstream filter after this one), the cost of the answer.
    if (d.allow.metadata !== undefined) {
      state.checked = withExtauthz(state.identity, d.allow.metadata);
      state.told = { ...state.routeTold, ...d.allow.metadata };
    }
    const w = await work();
    if ("error" in w) return w;
    // Nor may it touch the id the upstream stage finds the request by (retries need it).
    const reserved = [...CLIENT_CREDENTIAL_HEADERS, LLM_REQUEST_ID_HEADER];
    const { work: allowed, written } = withAllowedHeaders(w, d.allow, reserved);
    // A later attempt at another provider removes them (Envoy's upstream filters change the router's own headers).
    if (written.length > 0) state.provided = [...(state.provided ?? []), ...written];
    return allowed;
  }

  // ---- GwModels (models/serve.ts) ----

  /** Selects the request's model: its cluster goes in MODEL_CLUSTER_HEADER, and Envoy routes the request again. */
  #selectModel(state: RequestState, entry: ModelRouteEntry, metadata: JsonObject): Reply {
    const model = state.body?.model;
    if (typeof model !== "string" || model === "") {
      return clientErrorResponse(state.client, {
        status: 400,
        kind: "invalid_request",
        message: "the request names no model (`model` is required)",
      });
    }
    const r = chooseModel(entry, model, { vars: celVariables(state, ""), health: this.#modelHealth });
    if (!r.ok) return clientErrorResponse(state.client, r.error);
    state.model = { choice: r.choice, attempts: new ModelAttempts(this.#modelHealth, this.#now) };
    return {
      phase: "requestBody",
      headers: mutation({ [MODEL_CLUSTER_HEADER]: r.choice.cluster }),
      clearRouteCache: true,
      metadata,
    };
  }

  /**
   * The concrete model behind a model cluster's endpoint, for one attempt: its provider entry asked for the selected
   * name, its request header changes, or the 403 of its `authorization`. Undefined off GwModel routes.
   */
  #modelTarget(
    state: RequestState,
    cluster: string,
    providerName: string,
  ): { provider: LlmProviderEntry; headers?: HeaderChanges } | { error: LlmError } | undefined {
    const entry = state.entry.models;
    const provider = state.entry.backends[cluster]?.providers[providerName];
    if (entry === undefined || provider === undefined) return undefined;
    const t = modelTarget(entry, cluster, providerName, state.model?.choice);
    if (t === undefined) return undefined;
    const refused = authorizeModel(t.model, celVariables(state, providerName));
    // A client refused says nothing of the model's health: only attempts that go on are reported.
    if (refused !== undefined) return { error: refused };
    state.model?.attempts.start(t.model);
    // The virtual models it was chosen through first (their authorization was checked when it was chosen).
    const chain = virtualChain(entry, state.model?.choice);
    let own: HeaderChanges | undefined;
    for (const m of chain) own = thenHeaders(own, modelHeaders(m, "request"));
    own = thenHeaders(own, modelHeaders(t.model, "request"));
    // The cluster header was for Envoy's routing: the provider never sees it.
    const headers = {
      set: own?.set ?? {},
      add: own?.add ?? [],
      remove: [...(own?.remove ?? []), MODEL_CLUSTER_HEADER],
    };
    const p = withVirtualPolicies(entry, provider, chain);
    return {
      provider: t.ask === undefined ? p : { ...p, settings: { ...p.settings, model: p.settings.model ?? t.ask } },
      headers,
    };
  }

  /** Reports the outcome of a GwModel request's last attempt; the model's response header changes. */
  #modelResponse(
    state: RequestState | undefined,
    status: number,
    headers: Readonly<Record<string, string>>,
  ): HeaderChanges | undefined {
    const attempts = state?.model?.attempts;
    const model = attempts?.model;
    attempts?.finish(status, new Map(Object.entries(headers)));
    if (model === undefined || state?.attempt?.local === true) return undefined;
    // The concrete model's first, then its virtual models' from the innermost out.
    let changes = modelHeaders(model, "response");
    const entry = state?.entry.models;
    const chain = entry === undefined ? [] : virtualChain(entry, state?.model?.choice);
    for (const m of chain.reverse()) changes = thenHeaders(changes, modelHeaders(m, "response"));
    return changes;
  }

  /**
   * The request guards of `provider` over the client's request (the texts of its format): once per set of guards per
   * client request, whatever the number of attempts. Undefined when there are none or nothing to read.
   */
  #guardRequest(state: RequestState, provider: LlmProviderEntry): Guarded | Promise<Guarded> | undefined {
    const specs = provider.ai.promptGuard?.request;
    const client = state.client;
    const body = state.body;
    if (specs === undefined || specs.length === 0 || client === undefined || body === undefined) return undefined;
    const key = guardKey(specs);
    state.guarded ??= new Map();
    const known = state.guarded.get(key);
    if (known !== undefined) return known;
    const slots = requestSlots(client, body);
    const done = (o: GuardOutcome): Guarded => {
      if (o.action === "reject") return { reject: o.guard };
      if (o.action === "pass") return { body };
      // Masked: a copy of the body with the texts written back (another provider's guards may see the original).
      const copy = structuredClone(body);
      requestSlots(client, copy).write(o.texts);
      return { body: copy };
    };
    const outcome = runGuards("request", specs, slots.texts(), this.#guardContext(state, provider.name));
    const g = outcome instanceof Promise ? outcome.then(done) : done(outcome);
    state.guarded.set(key, g);
    return g;
  }

  #guardContext(state: RequestState, provider: string): GuardContext {
    return {
      headers: new Map(Object.entries(state.headers)),
      vars: () => celVariables(state, provider),
      ...(this.#remoteGuard !== undefined ? { remote: this.#remoteGuard } : {}),
      log: this.#log,
    };
  }

  /** Credentials of `provider`, then the provider work (#provide) on `body` (the guarded body, else the client's). */
  #obtain(
    state: RequestState,
    provider: LlmProviderEntry,
    body: Obj | undefined,
    fail: (error: LlmError) => ProviderWork,
    unavailable: (why: string) => ProviderWork,
  ): ProviderWork | Promise<ProviderWork> {
    const providerName = provider.name;
    const google = provider.auth.google;
    const aws = provider.auth.aws;
    // A route type forwarded as it is is signed once its body is read (Realtime never is: #provide refuses it).
    const signed = (state.client !== undefined && state.body !== undefined) || state.raw !== undefined;
    if (aws !== undefined && signed) {
      const keys = AwsCredentialSource.immediate(aws);
      if (keys !== undefined) return this.#provide(state, provider, body, { aws: keys }, fail);
      let role: RoleSession | undefined;
      if (aws.assumeRole !== undefined) {
        const r = roleSession(aws.assumeRole, celVariables(state, providerName));
        if ("error" in r) {
          this.#log(`llm provider ${providerName}: request rejected: ${r.error}`);
          return fail({ status: 400, kind: "invalid_request", message: `provider ${providerName}: ${r.error}` });
        }
        role = r;
      }
      return this.#aws
        .credentials({ auth: aws, region: awsRegion(provider), ...(role !== undefined ? { role } : {}) })
        .then(
          (c) => this.#provide(state, provider, body, { aws: c }, fail),
          (e: unknown) => unavailable(`AWS credentials: ${(e as Error).message}`),
        );
    }
    if (google === undefined) return this.#provide(state, provider, body, {}, fail);
    return this.#google.token(google).then(
      (bearer) => this.#provide(state, provider, body, { bearer }, fail),
      (e: unknown) => unavailable(`Google credentials: ${(e as Error).message}`),
    );
  }

  /**
   * The provider's own token on its request (`passthrough`, or a minted form: jwtSign, oauthTokenExchange,
   * crossAppAccess, cloudC), written where its location says on the request as it will leave (its path, its cookies);
   * instead, when it cannot be had, an error in the client's format and the provider is not called. The message names
   * the field and why, never a credential.
   */
  #withMinted(
    state: RequestState,
    provider: LlmProviderEntry,
    w: ProviderWork,
    fail: (error: LlmError) => ProviderWork,
  ): ProviderWork | Promise<ProviderWork> {
    const { passthrough, minted } = provider.auth;
    if ("error" in w || (passthrough === undefined && minted === undefined)) return w;
    // The token sources read the client's own headers (removed from the provider request, but still in state.headers);
    // a query location is added to the path as it leaves (a forwarded route type keeps the route's rewrite).
    const path = w.set[":path"] ?? state.upstreamPath ?? state.headers[":path"] ?? "/";
    const outgoing = { ...state.headers, ...w.set, ":path": path };
    const merge = (m: Mutation): ProviderWork => {
      // A later attempt at another provider removes them.
      state.provided = [...(state.provided ?? []), ...Object.keys(m.set).filter((k) => !k.startsWith(":"))];
      const set = { ...w.set, ...m.set };
      return { ...w, set, remove: [...w.remove, ...m.remove].filter((r) => !(r in set)) };
    };
    if (passthrough !== undefined) {
      const m: Mutation = { set: {}, remove: [] };
      const token = clientToken(state.headers);
      if (token !== undefined) writeAt(passthrough, token, outgoing, m);
      return merge(m);
    }
    if (minted === undefined) return w;
    const name = provider.name;
    // The plan's expressions may read the route's identities (resolve.ts CREDENTIAL_VARIABLES, `llm`).
    return this.#minter.mint(minted, { headers: outgoing, variables: identityOf(state) }).then(
      (r) => {
        if ("ok" in r) return merge(r.ok);
        this.#log(`llm provider ${name}: ${r.message}; answered ${r.status}`);
        return fail({
          status: r.status,
          kind: kindForStatus(r.status),
          message: `credentials of provider ${name} are not available: ${r.message}`,
        });
      },
      (e: unknown) => {
        this.#log(`llm provider ${name}: ${minted.field}: ${(e as Error).message}`);
        return fail({ status: 500, kind: "server", message: `credentials of provider ${name} are not available` });
      },
    );
  }

  #provide(
    state: RequestState,
    provider: LlmProviderEntry,
    guardedBody: Obj | undefined,
    creds: ProviderCredentials,
    fail: (error: LlmError) => ProviderWork,
  ): ProviderWork {
    const providerName = provider.name;
    // The id header stays: retries need it, and the upstream filters' mutations persist into them.
    const remove = [...CLIENT_CREDENTIAL_HEADERS, "accept-encoding", ...(state.provided ?? [])];
    if (state.listing !== undefined) {
      // The provider's own model list (or one model), at its path (spec: Models is `/v1/models`), whatever the route's
      // prefix; in the client's family when the provider's is another (models/list.ts).
      const target = modelsRequest(provider, creds);
      if (target !== undefined) {
        const l = listingRequest(state.listing, provider, target.path, state.headers[":path"] ?? "");
        state.attempt = { provider: providerName, ...(l.attempt !== undefined ? { listing: l.attempt } : {}) };
        state.provided = Object.keys(target.headers);
        const set: Record<string, string> = { ":path": l.path, ":authority": target.authority, ...target.headers };
        return { set, remove: remove.filter((r) => !(r in set)) };
      }
    }
    if (state.client === undefined || state.body === undefined) {
      if (provider.auth.aws !== undefined && (creds.aws === undefined || state.raw === undefined)) {
        // Bedrock has no websocket API (its bidirectional streams are HTTP/2 event streams signed event by event);
        // forwarding unsigned would only meet its refusal.
        return fail({
          status: 501,
          kind: "server",
          message: `provider ${providerName} (providerG) signs every request with SigV4; ${state.routeType} requests cannot be signed`,
        });
      }
      return this.#passthrough(state, provider, remove, creds);
    }
    const client = state.client;
    const body = applyAiPolicy(
      client,
      guardedBody ?? state.body,
      provider.ai,
      {
        method: state.headers[":method"] ?? "POST",
        path: state.headers[":path"] ?? "/",
        headers: state.headers,
        identity: identityOf(state),
      },
      providerName,
    );
    const model = providerModel(provider.settings, provider.ai, body.model);
    // The format may depend on the model (Claude on Vertex AI speaks messages, Gemini generate-content).
    const format = providerFormatFor(
      provider,
      client,
      model ?? (typeof body.model === "string" ? body.model : undefined),
    );
    const direction = format === undefined ? undefined : findDirection(client, format);
    if (format === undefined || direction === undefined) {
      return fail({
        status: 501,
        kind: "server",
        message: `provider ${providerName} does not serve ${state.routeType} requests`,
      });
    }
    const translated = direction.request(body, modelForFormat(provider, format, model, body.model), defaultContext);
    if (!translated.ok) return fail(translated.error);
    // Cache points and the guardrail go on the final Converse body (cache points depend on its layout), before SigV4
    // signs it.
    const cached =
      format === "converse" && provider.ai.promptCaching !== undefined
        ? addConverseCachePoints(translated.body, translated.meta.model, provider.ai.promptCaching)
        : translated.body;
    const final = format === "converse" ? withGuardrail(cached, provider.settings) : cached;
    const text = JSON.stringify(final);
    const target = providerRequest(provider, format, translated.meta.model, translated.meta.stream, text, creds);
    if (target === undefined) {
      return fail({ status: 501, kind: "server", message: `provider ${providerName} has no endpoint for ${format}` });
    }
    const guards = provider.ai.promptGuard;
    state.attempt = {
      provider: providerName,
      format,
      direction,
      meta: translated.meta,
      ...(guards !== undefined ? { guards } : {}),
    };
    state.provided = Object.keys(target.headers);
    const set: Record<string, string> = {
      ":path": target.path,
      ":authority": target.authority,
      "content-type": "application/json",
      "content-length": String(Buffer.byteLength(text)),
      ...target.headers,
    };
    return { set, remove: remove.filter((r) => !(r in set)), body: text };
  }

  /** Route types forwarded as they are: only the destination and the credentials change. */
  #passthrough(
    state: RequestState,
    provider: LlmProviderEntry,
    remove: string[],
    creds: ProviderCredentials,
  ): ProviderMutation {
    state.attempt = { provider: provider.name };
    const bearer = creds.bearer;
    const credentials: Record<string, string> = {
      ...provider.auth.headers,
      ...(bearer !== undefined ? { authorization: `Bearer ${bearer}` } : {}),
    };
    // The path as the route sent it, after the provider's base path if it has one.
    const path = providerPath(provider, state.upstreamPath ?? state.headers[":path"] ?? "/");
    if (state.raw !== undefined && provider.auth.aws !== undefined) {
      // SigV4 over what is sent: the path as it leaves (one stage: no rewrite follows) and the body as read.
      const type = state.headers["content-type"];
      const signed = type === undefined ? {} : { "content-type": type };
      const method = state.headers[":method"] ?? "POST";
      Object.assign(credentials, sigV4Headers(provider, method, path, signed, state.raw, creds));
      // A client's own AWS headers would contradict the signature (a session token with long-term keys).
      remove.push("x-amz-security-token", "x-amz-content-sha256");
    }
    state.provided = Object.keys(credentials);
    const set: Record<string, string> = {
      ":authority": provider.authority,
      ...(provider.basePath !== undefined ? { ":path": path } : {}),
      ...credentials,
    };
    // Browser websocket clients of the Realtime API pass their key as a subprotocol; like every client credential it
    // does not go to the provider, which gets the provider's own credentials in headers instead.
    const protocols = state.headers["sec-websocket-protocol"];
    if (protocols !== undefined && /openai-insecure-api-key\./.test(protocols)) {
      const kept = protocols
        .split(",")
        .map((p) => p.trim())
        .filter((p) => p !== "" && !p.startsWith("openai-insecure-api-key."));
      if (kept.length > 0) set["sec-websocket-protocol"] = kept.join(", ");
      else remove.push("sec-websocket-protocol");
    }
    return { set, remove: remove.filter((r) => !(r in set)) };
  }
}

/**
 * The client's own credential, as `passthrough` forwards it: its `Authorization: Bearer` token, else the key of the
 * header its SDK sends (x-api-key, api-key, x-goog-api-key).
 */
/** The client's own credential: its `Authorization: Bearer` token, else its provider-style key header. */
export function clientToken(headers: Readonly<Record<string, string>>): string | undefined {
  const bearer = /^Bearer\s+(\S+)$/i.exec(headers.authorization ?? "")?.[1];
  if (bearer !== undefined) return bearer;
  for (const h of ["x-api-key", "api-key", "x-goog-api-key"]) {
    const v = headers[h]?.trim();
    if (v !== undefined && v !== "") return v;
  }
  return undefined;
}

/** The CEL activation of a request's credential expressions: `request`, and `llm` as AI transformations see it. */
/**
 * The attempt's `extauthz` in the dynamic metadata the filters after the LLM stage read (the tracing stage, a user's
 * ext_proc), where the route's extAuth leaves its own: what its provider's check told; after an attempt that left
 * one, the route's again (`null` when the route has none), so it does not outlive its attempt.
 */
function withTold(state: RequestState, w: ProviderWork): ProviderWork {
  if ("error" in w) return w;
  if (state.told === undefined && state.wroteTold !== true) return w;
  if (state.told !== undefined) state.wroteTold = true;
  const value = state.told ?? state.routeTold ?? null;
  return { ...w, metadata: { [EXTAUTHZ_METADATA_NAMESPACE]: { [EXTAUTHZ_METADATA_KEY]: value } } };
}

/** The route's extAuth's `extauthz` in the dynamic metadata forwarded to the router stage (llm.ts), as JSON. */
function routeToldOf(req: ExtProcRequest): JsonObject | undefined {
  const v = req.metadataContext?.filterMetadata[EXTAUTHZ_METADATA_NAMESPACE]?.[EXTAUTHZ_METADATA_KEY];
  return v !== null && typeof v === "object" && !Array.isArray(v) ? (v as JsonObject) : undefined;
}

/** The format of the errors Sluice answers a request with: its client's, a model list client's family's. */
function errorFormat(state: RequestState | undefined): ClientFormat | undefined {
  const l = state?.listing;
  return state?.client ?? (l !== undefined ? LIST_ERROR_FORMAT[l.client] : undefined);
}

/** The identity the current attempt's steps see (RequestState.checked). */
function identityOf(state: RequestState): Readonly<Record<string, unknown>> {
  return state.checked ?? state.identity;
}

/** The client's connection from the router stage's request attributes (llm.ts sends them). */
function peerOf(req: ExtProcRequest): Peer | undefined {
  const a = req.attributes["envoy.filters.http.ext_proc"];
  if (a === undefined) return undefined;
  const source = endpointOf(a["source.address"], a["source.port"]);
  const destination = endpointOf(a["destination.address"], a["destination.port"]);
  if (source === undefined && destination === undefined) return undefined;
  return { ...(source !== undefined ? { source } : {}), ...(destination !== undefined ? { destination } : {}) };
}

function celVariables(state: RequestState, provider: string): Record<string, unknown> {
  const model = typeof state.body?.model === "string" ? state.body.model : undefined;
  const streaming = state.body?.stream === true;
  return {
    ...identityOf(state),
    request: requestVariable(state.headers),
    llm: toCel({
      model: model ?? null,
      stream: streaming,
      ...(model !== undefined ? { requestModel: model } : {}),
      streaming,
      provider,
    }),
  };
}

const forwardsBodyOf = new WeakMap<LlmRouteEntry, boolean>();
/** Whether a provider of the route's entry has an extAuth that sends the client's body (forwardBody). */
function forwardsBody(entry: LlmRouteEntry): boolean {
  let v = forwardsBodyOf.get(entry);
  if (v === undefined) {
    v = Object.values(entry.backends).some((b) =>
      Object.values(b.providers).some((p) => p.extAuth?.forwardBody !== undefined),
    );
    forwardsBodyOf.set(entry, v);
  }
  return v;
}

/** Whether a request of this route may go to a cloudA provider (its one provider, else any of its backends'). */
function hasAwsProvider(entry: LlmRouteEntry, single: SingleStage | undefined): boolean {
  if (single !== undefined) return entry.backends[single.cluster]?.providers[single.provider]?.auth.aws !== undefined;
  return Object.values(entry.backends).some((b) => Object.values(b.providers).some((p) => p.auth.aws !== undefined));
}

/** A model's request header changes on the provider's request (after the provider work's own headers). */
function withRequestHeaders(w: ProviderWork, c: HeaderChanges): ProviderWork {
  if ("error" in w) return w;
  const set = { ...w.set, ...c.set };
  for (const [name, value] of c.add) set[name] = set[name] === undefined ? value : `${set[name]},${value}`;
  return { ...w, set, remove: [...w.remove.filter((r) => !(r in set)), ...c.remove.filter((r) => !(r in set))] };
}

/** A model's response header changes on the answer to the client. */
function withHeaderChanges(reply: Reply, c: HeaderChanges): Reply {
  if (reply.phase === "immediate") return reply;
  const h = reply.headers;
  return {
    ...reply,
    headers: {
      set: { ...(h?.set ?? {}), ...c.set },
      add: [...(h?.add ?? []), ...c.add],
      remove: [...(h?.remove ?? []), ...c.remove],
    },
  };
}

/** The headers of a model list answer made at the response headers (`status` when it changes). */
function listingHeaders(body: JsonObject, status: number | undefined): Record<string, string> {
  const set: Record<string, string> = {
    "content-type": "application/json",
    "content-length": String(Buffer.byteLength(JSON.stringify(body))),
  };
  if (status !== undefined) set[":status"] = String(status);
  return set;
}

/** Whether `out`, the answer to `req`, ends the ext_proc exchange for this HTTP request. */
function isLast(req: ExtProcRequest, out: Reply): boolean {
  if (out.phase === "immediate") return true;
  const r = req.request;
  return (
    (r.case === "responseBody" && r.value.endOfStream) ||
    (r.case === "responseHeaders" && r.value.endOfStream) ||
    r.case === "responseTrailers"
  );
}

/**
 * providerG `guardrail`: Bedrock applies the guardrail to the conversation (`guardrailConfig`); its interventions come
 * back as the `guardrail_intervened` stop reason, which the response translators map.
 */
function withGuardrail<B extends object>(body: B, settings: Readonly<Record<string, unknown>>): B {
  const g = settings["guardrail"];
  if (!isObject(g) || typeof g["identifier"] !== "string" || typeof g["version"] !== "string") return body;
  return { ...body, guardrailConfig: { guardrailIdentifier: g["identifier"], guardrailVersion: g["version"] } };
}
