// The gRPC services Sluice serves to Envoy besides ADS (ext_authz, ext_proc). Every service is on the ADS port
// (grpc-js; bootstrap cluster `sluice_services`); the methods on Envoy's request path (ext_authz Check, the LLM
// ext_proc Process stream) are also served by the lightweight HTTP/2 server on the authz port (bootstrap cluster
// `sluice_authz`), which is the one the translator points Envoy at. Each service gets every new translation result, from which it takes its policy tables.

import type * as grpc from "@grpc/grpc-js";
import { Minter } from "../credentials/mint.js";
import { CredentialService, EXT_PROC_PATH } from "../credentials/service.js";
import {
  addExtAuthzService,
  type ExtAuthzOptions,
  type ExtAuthzPolicy,
  extAuthzHttpHandler,
  extAuthzUnaryHandlers,
  type PolicyTable,
} from "../extauthz/server.js";
import { carryOverState, UserExtAuthClients } from "../extauthz/user-ext-auth.js";
import { AwsCredentialSource } from "../extproc/llm/aws-credentials.js";
import { GoogleTokens } from "../extproc/llm/google-tokens.js";
import { remoteGuards } from "../extproc/llm/guards/remote/index.js";
import { RealtimeRelay } from "../extproc/llm/realtime/relay.js";
import { LlmExtProcService } from "../extproc/llm/service.js";
import { TokenLimiter } from "../extproc/llm/token-limits.js";
import type { Http1Handler, Http1Upgrade } from "../grpc/http1.js";
import type { BidiHandler, UnaryHandler } from "../grpc/unary-server.js";
import type { EndpointHealth } from "../health/endpoint-health.js";
import { SpanRelay } from "../otlp/relay.js";
import { EXPORT_PATH } from "../otlp/spans.js";
import type { TranslationResult } from "../translate/translate.js";

export interface SluiceService {
  readonly name: string;
  addTo(server: grpc.Server): void;
  /** Unary methods by gRPC path, for the hot-path server (src/grpc/unary-server.ts). */
  readonly unary?: ReadonlyMap<string, UnaryHandler>;
  /** The hot-path server's HTTP/1.1 requests (Envoy's HTTP ext_authz); one service at most has them. */
  readonly http1?: Http1Handler;
  /** The same server's HTTP/1.1 upgrades this service takes (the Realtime relay's websockets). */
  readonly upgrade?: Http1Upgrade;
  /** Bidirectional-stream methods by gRPC path, for the same server. */
  readonly bidi?: ReadonlyMap<string, BidiHandler>;
  /** Called after every translation, before the new snapshot is published, so Envoy never sees an unknown id. */
  update(result: TranslationResult): void;
  /** Releases what the service holds open (connections to other services). */
  close?(): void;
  /** Given Sluice's backend health scoring once the server has made it (the Realtime relay reads its evictions). */
  useHealth?(health: EndpointHealth): void;
}

export interface ServiceOptions {
  readonly log: (line: string) => void;
}

/**
 * Envoy's ext_authz → Sluice: API keys, basic auth, CEL authorization, L4 network authorization, and users' extAuth
 * services with a decision cache. Serves the newest policy table and, for ids that left it, the previous one: an
 * Envoy that has not yet applied the new snapshot still names the old ids, which must keep their old meaning rather
 * than fail. Decision caches move to the new table's entries of the same scope, so an update does not empty them.
 */
export function extAuthzService(opts: ServiceOptions): SluiceService {
  let published: PolicyTable | undefined;
  let current: PolicyTable = new Map();
  let previous: PolicyTable = new Map();
  const table: PolicyTable = {
    get: (id: string) => current.get(id) ?? previous.get(id),
    has: (id: string) => current.has(id) || previous.has(id),
    get size() {
      return current.size;
    },
    forEach: (fn: (v: ExtAuthzPolicy, k: string, m: PolicyTable) => void) => current.forEach(fn),
    entries: () => current.entries(),
    keys: () => current.keys(),
    values: () => current.values(),
    [Symbol.iterator]: () => current[Symbol.iterator](),
  };
  const clients = new UserExtAuthClients();
  const options: ExtAuthzOptions = {
    policies: () => table,
    clients,
    // Fields only: policy ids and error texts, never credentials.
    logger: { warn: (m, f) => opts.log(`${m}${f ? ` ${JSON.stringify(f)}` : ""}`) },
  };
  return {
    name: "ext_authz",
    addTo(server) {
      addExtAuthzService(server, options);
    },
    unary: extAuthzUnaryHandlers(options),
    http1: extAuthzHttpHandler(options),
    update(result) {
      if (result.extAuthzPolicies === published) return;
      published = result.extAuthzPolicies;
      const next = carryOverState(result.extAuthzPolicies, [current, previous]);
      previous = current;
      current = next;
    },
    close() {
      clients.close();
    },
  };
}

/** The services `sluice serve` and `sluice run` host. */
export function defaultServices(opts: ServiceOptions): SluiceService[] {
  // The remote prompt guards (moderationA, guardrailsA, guardrailsB) share the LLM ext_proc's cloudA credentials and
  // cloudB tokens: an assumed role or a service account's token is fetched once for both.
  const aws = new AwsCredentialSource();
  const google = new GoogleTokens();
  const remoteGuard = remoteGuards({ aws, google });
  // One set of `tokens` buckets: the LLM ext_proc admits and debits requests, the Realtime relay debits its sessions.
  const limiter = new TokenLimiter();
  const llm = new LlmExtProcService({ log: opts.log, aws, google, remoteGuard, limiter });
  // Backend credentials (src/credentials/) share the ext_proc method: streams without a plan id go on to the LLM's.
  const credentials = new CredentialService({
    minter: new Minter({ aws, google }),
    log: opts.log,
    next: llm.bidi.get(EXT_PROC_PATH),
  });
  return [
    extAuthzService(opts),
    llm,
    credentials,
    // The relay keeps its own minter (each retains the exchange caches of its own plans) but shares the cloudB tokens.
    realtimeRelayService(new RealtimeRelay({ log: opts.log, remote: remoteGuard, google, limiter })),
    spanRelayService(new SpanRelay({ log: opts.log })),
  ];
}

/** The span relay (src/otlp/relay.ts): Envoy's trace exports a tracing policy rewrites, on the authz port. */
function spanRelayService(relay: SpanRelay): SluiceService {
  return {
    name: "span-relay",
    addTo() {},
    unary: new Map([[EXPORT_PATH, relay.handle]]),
    update: (result) => relay.update(result),
    close: () => relay.close(),
  };
}

/** The Realtime relay (src/extproc/llm/realtime/relay.ts): guarded Realtime websockets, on the authz port's HTTP/1.1. */
function realtimeRelayService(relay: RealtimeRelay): SluiceService {
  return {
    name: "llm-realtime-relay",
    addTo() {},
    upgrade: (req, socket, rest) => relay.upgrade(req, socket, rest),
    update: (result) => relay.update(result),
    close: () => relay.close(),
    useHealth: (health) => relay.useHealth((cluster) => health.evicted(cluster)),
  };
}
