// The credential ext_proc: Envoy's upstream ext_proc filter on a backend's cluster (xds/backend-credential.ts) calls
// Process on Sluice's hot-path server with the plan id as gRPC initial metadata; this answers the request headers
// (and, for SigV4, the buffered body) with the credential written in (mint.ts), or with an immediate 401 / 503 naming
// the field when it cannot be had: the request never leaves without its credential. Plans come from the cluster IR
// of every translation; the previous translation's stay served for an Envoy that has not applied the new one yet.
// Logs name the plan's field and the reason, never a credential.

import { identityVariables } from "../extproc/llm/cel.js";
import { type ExtProcRequest, type Reply, readProcessingRequest, writeReply } from "../extproc/llm/wire.js";
import { sourceVariable } from "../extproc/transformation.js";
import type { BidiCall, BidiHandler } from "../grpc/unary-server.js";
import type { TranslationResult } from "../translate/translate.js";
import type { Minter, OutgoingRequest } from "./mint.js";
import { CREDENTIAL_METADATA, type CredentialPlan, needsBody } from "./plan.js";

export const EXT_PROC_PATH = "/envoy.service.ext_proc.v3.ExternalProcessor/Process";

export class CredentialService {
  readonly name = "credentials";
  #current = new Map<string, CredentialPlan>();
  #previous = new Map<string, CredentialPlan>();
  #published: TranslationResult["gateways"] | undefined;
  readonly #minter: Minter;
  readonly #log: (line: string) => void;
  readonly #next: BidiHandler | undefined;

  /** `next`: the Process handler of the other ext_proc services (the LLM one), for streams without a plan id. */
  constructor(opts: { minter: Minter; log: (line: string) => void; next?: BidiHandler | undefined }) {
    this.#minter = opts.minter;
    this.#log = opts.log;
    this.#next = opts.next;
  }

  addTo(): void {}

  get bidi(): ReadonlyMap<string, BidiHandler> {
    return new Map([[EXT_PROC_PATH, (call: BidiCall) => this.#dispatch(call)]]);
  }

  update(result: TranslationResult): void {
    if (result.gateways === this.#published) return;
    this.#published = result.gateways;
    const next = new Map<string, CredentialPlan>();
    for (const gw of result.gateways) for (const plan of gw.credentialPlans ?? []) next.set(plan.id, plan);
    this.#previous = this.#current;
    this.#current = next;
    this.#minter.retain(new Set([...this.#current.keys(), ...this.#previous.keys()]));
  }

  /** Number of plans served (tests). */
  get size(): number {
    return this.#current.size;
  }

  #plan(id: string): CredentialPlan | undefined {
    return this.#current.get(id) ?? this.#previous.get(id);
  }

  #dispatch(call: BidiCall): void {
    const id = call.headers[CREDENTIAL_METADATA];
    if (id === undefined && this.#next !== undefined) {
      this.#next(call);
      return;
    }
    this.#serve(call, id ?? "");
  }

  #serve(call: BidiCall, id: string): void {
    let closed = false;
    let headers: Record<string, string> = {};
    let variables: Record<string, unknown> = {};
    const answer = (r: Reply, last: boolean) => {
      if (closed) return;
      call.write(writeReply(r));
      if (last) {
        closed = true;
        call.end();
      }
    };
    const finish = (phase: "requestHeaders" | "requestBody", req: OutgoingRequest) => {
      const plan = this.#plan(id);
      if (plan === undefined) {
        this.#log(`credentials: no plan ${id}; answered 503`);
        answer(refusal(503, "backend credentials are not available (unknown credential plan)"), true);
        return;
      }
      this.#minter
        .mint(plan, req)
        .then((r) => {
          if ("ok" in r) {
            answer({ phase, headers: { set: r.ok.set, remove: r.ok.remove } }, true);
            return;
          }
          this.#log(`credentials: ${plan.backend} ${r.message}; answered ${r.status}`);
          answer(refusal(r.status, `backend credentials are not available: ${r.message}`), true);
        })
        .catch((e: unknown) => {
          this.#log(`credentials: ${plan.backend}: ${(e as Error).message}`);
          answer(refusal(500, "backend credentials: gateway error"), true);
        });
    };
    call.on("error", () => {
      closed = true;
    });
    call.on("end", () => {
      if (!closed) {
        closed = true;
        call.end();
      }
    });
    call.on("data", (bytes) => {
      let req: ExtProcRequest;
      try {
        req = readProcessingRequest(bytes);
      } catch (e) {
        this.#log(`credentials: undecodable message: ${(e as Error).message}`);
        closed = true;
        call.end();
        return;
      }
      const r = req.request;
      if (r.case === "requestHeaders") {
        // What the plan's expressions read besides the request, where Envoy forwards it (xds/backend-credential.ts):
        // the identities' metadata, the client's address.
        const source = sourceVariable(req);
        variables = {
          ...identityVariables(req.metadataContext?.filterMetadata),
          ...(source !== undefined ? { source } : {}),
        };
        headers = {};
        for (const h of r.value.headers?.headers ?? []) {
          headers[h.key.toLowerCase()] = h.rawValue.byteLength > 0 ? Buffer.from(h.rawValue).toString("utf8") : h.value;
        }
        const plan = this.#plan(id);
        // SigV4 signs the body: wait for it (Envoy buffers it whole, BUFFERED mode).
        if (plan !== undefined && needsBody(plan) && !r.value.endOfStream) {
          answer({ phase: "requestHeaders" }, false);
          return;
        }
        finish("requestHeaders", { headers, variables });
        return;
      }
      if (r.case === "requestBody") finish("requestBody", { headers, body: r.value.body, variables });
    });
  }
}

function refusal(status: number, message: string): Reply {
  return {
    phase: "immediate",
    status,
    headers: { set: { "content-type": "text/plain" } },
    body: message,
    details: "sluice_backend_credential",
  };
}
