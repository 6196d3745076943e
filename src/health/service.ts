// The health ext_proc: Envoy's upstream ext_proc on a cluster with Sluice health scoring (xds/backend-health.ts), in
// observability mode, sends each attempt's response headers (and the body when the condition reads it) with the
// endpoint's address (`upstream.address`); this judges the response with `unhealthyCondition` (default: a 5xx) and
// records it in EndpointHealth. Evictions and returns republish the snapshots with the endpoints' EDS health
// (`endpointOverlay`, src/cli/server.ts). Streams of other stages go on to `next` (the credential and LLM ext_proc).
//
// Scores live in this Sluice process: every Envoy of every Gateway it serves reports to it and gets the same EDS, so an
// endpoint's score counts the responses of all of them; a restart starts every endpoint afresh, in rotation at 100.

import { anyUnpack } from "@bufbuild/protobuf/wkt";
import { EXT_PROC_PATH } from "../credentials/service.js";
import { evaluateText } from "../extproc/llm/cel.js";
import { type ExtProcHeaders, type ExtProcRequest, readProcessingRequest } from "../extproc/llm/wire.js";
import { RESPONSE_ENVIRONMENT } from "../extproc/transformation.js";
import type { Cluster } from "../gen/envoy/config/cluster/v3/cluster_pb.js";
import { ExternalProcessorSchema } from "../gen/envoy/extensions/filters/http/ext_proc/v3/ext_proc_pb.js";
import { HttpProtocolOptionsSchema } from "../gen/envoy/extensions/upstreams/http/v3/http_protocol_options_pb.js";
import type { BidiCall, BidiHandler } from "../grpc/unary-server.js";
import { LLM_PROVIDER_ATTRIBUTE, LLM_STAGE_METADATA } from "../translate/llm/table.js";
import { HEALTH_FILTER_NAME } from "../translate/xds/backend-health.js";
import {
  decodeHealthScore,
  EndpointHealth,
  HEALTH_CLUSTER_METADATA,
  HEALTH_SPEC_METADATA,
  HEALTH_STAGE,
  lbEndpointKey,
  providerKey,
  scoringFor,
} from "./endpoint-health.js";
import { ProviderDns, type Resolve } from "./provider-dns.js";

const HTTP_PROTOCOL_OPTIONS = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions";

import type { ClusterLoadAssignment } from "../gen/envoy/config/endpoint/v3/endpoint_pb.js";
import type { HealthScoreIR } from "../translate/ir.js";
import type { TranslationResult } from "../translate/translate.js";

/** Longest response body kept for a condition that reads it; the rest is not seen by the condition. */
const MAX_BODY = 1 << 20;

const td = new TextDecoder();

export class HealthService {
  readonly name = "backend-health";
  readonly health: EndpointHealth;
  /** Host names of scored AI providers, resolved by Sluice (their cluster is EDS: provider-dns.ts). */
  readonly dns: ProviderDns;
  readonly #next: BidiHandler | undefined;
  readonly #log: (line: string) => void;
  #published: TranslationResult["gateways"] | undefined;
  /** Conditions already reported as not giving a boolean (logged once each). */
  readonly #warned = new Set<string>();

  /** `onChange`: an endpoint was evicted or returned (the snapshots need its EDS health: src/cli/server.ts). */
  constructor(opts: {
    log: (line: string) => void;
    next?: BidiHandler | undefined;
    onChange?: () => void;
    now?: () => number;
    resolve?: Resolve;
    dnsRefreshMs?: number;
  }) {
    this.#log = opts.log;
    this.#next = opts.next;
    this.health = new EndpointHealth({
      ...(opts.onChange !== undefined ? { onChange: opts.onChange } : {}),
      ...(opts.now !== undefined ? { now: opts.now } : {}),
    });
    this.dns = new ProviderDns({
      log: opts.log,
      ...(opts.onChange !== undefined ? { onChange: opts.onChange } : {}),
      ...(opts.resolve !== undefined ? { resolve: opts.resolve } : {}),
      ...(opts.dnsRefreshMs !== undefined ? { refreshMs: opts.dnsRefreshMs } : {}),
    });
  }

  /** Before `result` is published: its providers' host names tracked, the new ones looked up (provider-dns.ts). */
  prepare(result: TranslationResult): Promise<void> {
    return this.dns.track(result.gateways.flatMap((g) => g.xds.endpoints));
  }

  /** `endpoints` as Envoy gets them: host names resolved, evicted endpoints marked UNHEALTHY. */
  overlay(endpoints: readonly ClusterLoadAssignment[]): ClusterLoadAssignment[] {
    return this.health.overlay(this.dns.overlay(endpoints));
  }

  addTo(): void {}

  get bidi(): ReadonlyMap<string, BidiHandler> {
    return new Map([[EXT_PROC_PATH, (call: BidiCall) => this.#dispatch(call)]]);
  }

  /** The scored clusters of the new translation, read from the xDS it publishes (the filter carries the scoring). */
  update(result: TranslationResult): void {
    if (result.gateways === this.#published) return;
    this.#published = result.gateways;
    const clusters = new Map<string, { cfg: HealthScoreIR; endpoints: string[] }>();
    for (const g of result.gateways) {
      const assignments = new Map(g.xds.endpoints.map((a) => [a.clusterName, a]));
      for (const c of g.xds.clusters) {
        const cfg = scoring(c);
        if (cfg === undefined) continue;
        // Scored by the assignment it reads: a variant of an AI cluster scored as the cluster (another transformation)
        // shares the cluster's; one with a scoring or endpoints of its own reads its own (xds/llm-health.ts).
        const name = c.edsClusterConfig?.serviceName || c.name;
        if (clusters.has(name)) continue;
        clusters.set(name, { cfg, endpoints: endpointKeys(assignments.get(name)) });
      }
    }
    this.health.configure(clusters);
  }

  close(): void {
    this.health.close();
    this.dns.close();
  }

  #dispatch(call: BidiCall): void {
    if (call.headers[LLM_STAGE_METADATA] !== HEALTH_STAGE && this.#next !== undefined) {
      this.#next(call);
      return;
    }
    this.#serve(call, call.headers[HEALTH_CLUSTER_METADATA] ?? "");
  }

  #serve(call: BidiCall, cluster: string): void {
    let closed = false;
    let status = 0;
    let headers: Map<string, string> | undefined;
    let endpoint: string | undefined;
    const chunks: Uint8Array[] = [];
    let size = 0;
    const finish = () => {
      if (closed) return;
      closed = true;
      call.end();
      if (headers !== undefined && endpoint !== undefined) this.#judge(cluster, endpoint, status, headers, chunks);
    };
    call.on("error", () => {
      closed = true;
    });
    // A body that ends in trailers (not sent) has no end_of_stream: judged when Envoy closes the stream.
    call.on("end", finish);
    call.on("data", (bytes) => {
      if (closed) return;
      let req: ExtProcRequest;
      try {
        req = readProcessingRequest(bytes);
      } catch (e) {
        this.#log(`health: undecodable message: ${(e as Error).message}`);
        closed = true;
        call.end();
        return;
      }
      const r = req.request;
      if (r.case === "responseHeaders") {
        const h = headerList(r.value);
        status = Number(h.get(":status") ?? "0");
        headers = new Map([...h].filter(([k]) => !k.startsWith(":")));
        // An AI cluster's endpoints are scored per provider (its endpoint metadata), others per address.
        const attrs = req.attributes["envoy.filters.http.ext_proc"];
        const provider = attrs?.[LLM_PROVIDER_ATTRIBUTE];
        const a = attrs?.["upstream.address"];
        endpoint =
          typeof provider === "string" && provider !== ""
            ? providerKey(provider)
            : typeof a === "string"
              ? a
              : undefined;
        if (!this.health.config(cluster)?.responseBody || r.value.endOfStream) finish();
      } else if (r.case === "responseBody") {
        if (size < MAX_BODY) {
          const part = r.value.body.subarray(0, MAX_BODY - size);
          chunks.push(part);
          size += part.byteLength;
        }
        if (r.value.endOfStream) finish();
      }
    });
  }

  #judge(cluster: string, endpoint: string, status: number, headers: Map<string, string>, body: Uint8Array[]) {
    const all = this.health.config(cluster);
    if (all === undefined) return;
    const cfg = scoringFor(all, endpoint);
    let unhealthy: boolean;
    if (cfg.condition === undefined) unhealthy = status >= 500;
    else {
      const response = {
        code: BigInt(status),
        headers,
        ...(cfg.responseBody ? { body: td.decode(Buffer.concat(body)) } : {}),
      };
      const v = evaluateText(cfg.condition, { response }, RESPONSE_ENVIRONMENT);
      // Only `true` is unhealthy: neither a failing expression nor a backend can evict an endpoint by itself.
      unhealthy = v === true;
      if (typeof v !== "boolean" && !this.#warned.has(cfg.condition)) {
        if (this.#warned.size > 1000) this.#warned.clear();
        this.#warned.add(cfg.condition);
        this.#log(`health: unhealthyCondition of ${cluster} did not give a boolean (${typeof v}); counted healthy`);
      }
    }
    this.health.record(cluster, endpoint, unhealthy);
  }
}

/** Scoring by Cluster object: the translation memo hands back the same objects for unchanged clusters. */
const scorings = new WeakMap<Cluster, HealthScoreIR | null>();

/** The scoring a cluster's health filter carries (backend-health.ts), or undefined. */
function scoring(c: Cluster): HealthScoreIR | undefined {
  const known = scorings.get(c);
  if (known !== undefined) return known ?? undefined;
  let found: HealthScoreIR | undefined;
  const options = c.typedExtensionProtocolOptions[HTTP_PROTOCOL_OPTIONS];
  const http = options !== undefined ? anyUnpack(options, HttpProtocolOptionsSchema) : undefined;
  const filter = http?.httpFilters.find((f) => f.name === HEALTH_FILTER_NAME);
  if (filter?.configType.case === "typedConfig") {
    const p = anyUnpack(filter.configType.value, ExternalProcessorSchema);
    const text = p?.grpcService?.initialMetadata.find((m) => m.key === HEALTH_SPEC_METADATA)?.value;
    found = text !== undefined ? decodeHealthScore(text) : undefined;
  }
  scorings.set(c, found ?? null);
  return found;
}

/** The scoring key of each endpoint of an assignment: `address:port`, or an AI provider's (endpoint-health.ts). */
function endpointKeys(a: ClusterLoadAssignment | undefined): string[] {
  const out = new Set<string>();
  for (const locality of a?.endpoints ?? []) {
    for (const lb of locality.lbEndpoints) {
      const key = lbEndpointKey(lb);
      if (key !== undefined) out.add(key);
    }
  }
  return [...out];
}

function headerList(h: ExtProcHeaders): Map<string, string> {
  const out = new Map<string, string>();
  for (const x of h.headers?.headers ?? []) out.set(x.key, x.value !== "" ? x.value : td.decode(x.rawValue));
  return out;
}
