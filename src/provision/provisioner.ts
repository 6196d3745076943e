// The Lease holder's provisioning. For each Gateway Sluice serves, the objects renderProxy gives are checked by the
// API server (a dry-run server-side apply, strict field validation), then applied by server-side apply with field
// manager `sluice`, owned by the Gateway (kube-controller-manager's garbage collector deletes them with it).
//
// - A Gateway whose parameters cannot be applied (a problem of severity error from rendering, or an object the API
//   server refuses) keeps its last good objects: nothing is written, the GwParameters gets a condition naming the
//   field and the Gateway a Warning Event.
// - Cheap when nothing changed: a translation re-renders every Gateway but writes only those whose objects differ from
//   what was last applied (a route change touches no Deployment); a render the API server already took is not
//   checked by a dry run again.
// - Drift is corrected: the provisioned objects are watched (owned-watch.ts), and one edited or deleted by another
//   hand has its Gateway's objects re-applied at once; every `resyncMs` (and on winning the Lease) everything is
//   re-applied as well (server-side apply of an unchanged object writes nothing). Fields Sluice does not set are left
//   to whoever owns them (an HPA's replicas, a label or annotation added by hand): an apply with force takes back only
//   the fields Sluice's own render sets, so re-applying after such an edit changes nothing and wakes nothing.
// - The session key Secret is created once and never written again (rotating it would end every MCP session).
// - Objects no longer wanted (a PodDisruptionBudget or HPA whose overlay was removed, the Deployment after a switch
//   to a DaemonSet) are deleted.

import { createHash, randomBytes } from "node:crypto";
import type { Gateway, GatewayClass } from "../api/gateway-api.js";
import type { GwParameters } from "../api/sluice.js";
import { isKubeError, type KubeClient, type KubeObject, resourcePath } from "../sources/kube/client.js";
import { proxyName, SESSION_KEY_KEY, sessionKeySecretName } from "./names.js";
import { type Drift, OwnedWatch } from "./owned-watch.js";
import { effectiveParameters, type ParametersProblem } from "./parameters.js";
import { type ObjectJson, type ProvisionSettings, renderProxy } from "./render.js";

export const PROVISION_FIELD_MANAGER = "sluice";

interface Resource {
  readonly group: string;
  readonly version: string;
  readonly plural: string;
}

/** Where each provisioned kind is served. */
export const PROVISIONED_KINDS: Readonly<Record<string, Resource>> = {
  ServiceAccount: { group: "", version: "v1", plural: "serviceaccounts" },
  ConfigMap: { group: "", version: "v1", plural: "configmaps" },
  Secret: { group: "", version: "v1", plural: "secrets" },
  Deployment: { group: "apps", version: "v1", plural: "deployments" },
  DaemonSet: { group: "apps", version: "v1", plural: "daemonsets" },
  Service: { group: "", version: "v1", plural: "services" },
  PodDisruptionBudget: { group: "policy", version: "v1", plural: "poddisruptionbudgets" },
  HorizontalPodAutoscaler: { group: "autoscaling", version: "v2", plural: "horizontalpodautoscalers" },
};

/** Kinds deleted when no longer rendered (the others always are). */
const OPTIONAL_KINDS = ["Deployment", "DaemonSet", "PodDisruptionBudget", "HorizontalPodAutoscaler"] as const;

/** The overlay field that produces a kind, to name it when the API server refuses the object. */
const OVERLAY_OF: Readonly<Record<string, string>> = {
  Deployment: "deployment",
  DaemonSet: "daemonSet",
  Service: "service",
  ServiceAccount: "serviceAccount",
  PodDisruptionBudget: "podDisruptionBudget",
  HorizontalPodAutoscaler: "horizontalPodAutoscaler",
};

export interface ProvisionerView {
  object(kind: string, namespace: string | undefined, name: string): KubeObject | undefined;
}

export interface ProvisionOutcome {
  /** `namespace/name` of the Gateway. */
  readonly gateway: string;
  readonly problems: readonly ParametersProblem[];
  /** True when this pass applied the objects; false when it kept the last good ones. */
  readonly applied: boolean;
  /** The GwParameters that took part. */
  readonly sources: readonly string[];
}

export interface ProvisionerOptions {
  readonly settings: ProvisionSettings;
  readonly log: (line: string) => void;
  /** After each pass: every Gateway's outcome (status and Events are the caller's). */
  readonly onOutcomes: (outcomes: readonly ProvisionOutcome[]) => void;
  /** How often everything is re-applied without a change (drift correction); 0: only on changes. */
  readonly resyncMs: number;
}

/**
 * The message of an object the API server refuses (invalid, or not of its schema: server-side apply answers a field
 * of the wrong type with a 500 "failed to create typed patch object"); undefined for any other failure.
 */
function refusal(e: unknown): string | undefined {
  if (isKubeError(e, 400) || isKubeError(e, 422)) return (e as Error).message;
  if (isKubeError(e, 500) && (e as Error).message.includes("failed to create typed patch object"))
    return (e as Error).message;
  return undefined;
}

export class Provisioner {
  readonly #client: KubeClient;
  readonly #view: ProvisionerView;
  readonly #opts: ProvisionerOptions;
  #active = false;
  #gateways: readonly string[] = [];
  #running: Promise<void> | undefined;
  #again = false;
  /** Whether the pass asked for again re-applies everything (a resync), or only what changed. */
  #againFull = false;
  /** Per Gateway, the hash of the objects last applied (and so accepted by the API server). */
  readonly #applied = new Map<string, string>();
  #timer: NodeJS.Timeout | undefined;
  /** The kinds last applied per Gateway: what is no longer among them is looked for and deleted. */
  readonly #lastKinds = new Map<string, string>();
  /** Gateways whose objects were changed by another hand: re-applied in the next pass even if their render is not. */
  readonly #drifted = new Set<string>();
  /** Per provisioned object (`kind/namespace/name`), the resourceVersion of Sluice's last write ("" once deleted). */
  readonly #written = new Map<string, string>();
  /** Per provisioned object name (`namespace/name`), its Gateway (`namespace/name`). */
  readonly #owners = new Map<string, string>();
  readonly #watch: OwnedWatch;
  /** Passes done, objects applied, changes by another hand put right (tests, /status). */
  readonly stats = { passes: 0, applies: 0, refusals: 0, unchanged: 0, drift: 0 };

  constructor(client: KubeClient, view: ProvisionerView, opts: ProvisionerOptions) {
    this.#client = client;
    this.#view = view;
    this.#opts = opts;
    this.#watch = new OwnedWatch(client, PROVISIONED_KINDS, { log: opts.log, onDrift: (d) => this.#onDrift(d) });
  }

  /** A provisioned object was edited or deleted: unless the write was Sluice's, its Gateway is applied again. */
  #onDrift(d: Drift): void {
    if (!this.#active) return;
    const written = this.#written.get(`${d.kind}/${d.namespace}/${d.name}`);
    if (written !== undefined && written === (d.resourceVersion ?? "")) return;
    const gateway = this.#owners.get(`${d.namespace}/${d.name}`);
    if (gateway === undefined || !this.#gateways.includes(gateway)) return;
    this.stats.drift++;
    this.#opts.log(
      `provision: ${d.kind} ${d.namespace}/${d.name} was ${d.resourceVersion === undefined ? "deleted" : "changed"} by another hand; applying Gateway ${gateway}'s objects again`,
    );
    this.#drifted.add(gateway);
    this.#kick(false);
  }

  /** Only the Lease holder provisions. */
  set active(on: boolean) {
    if (on === this.#active) return;
    this.#active = on;
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
    if (on) this.#watch.start();
    if (on && this.#opts.resyncMs > 0) {
      this.#timer = setInterval(() => this.#kick(true), this.#opts.resyncMs);
      this.#timer.unref();
    }
    if (on) this.#lastKinds.clear();
    if (on) this.#applied.clear();
    if (on) this.#kick(true);
  }

  /** The Gateways Sluice serves (`namespace/name`), after each translation. */
  reconcile(gateways: readonly string[]): void {
    this.#gateways = gateways;
    // Forget Gateways no longer served (their objects went with them).
    const served = new Set(gateways);
    for (const map of [this.#applied, this.#lastKinds]) for (const k of map.keys()) if (!served.has(k)) map.delete(k);
    for (const [k, gateway] of this.#owners) if (!served.has(gateway)) this.#owners.delete(k);
    this.#kick(false);
  }

  /** A pass: `full` re-applies every Gateway's objects, else only those whose render changed. */
  #kick(full: boolean): void {
    if (!this.#active) return;
    if (this.#running !== undefined) {
      this.#again = true;
      this.#againFull ||= full;
      return;
    }
    this.#againFull = full;
    this.#running = (async () => {
      // Not one synchronous run: #running must be set before the pass can end and clear it.
      await Promise.resolve();
      do {
        this.#again = false;
        const pass = this.#againFull;
        this.#againFull = false;
        const outcomes: ProvisionOutcome[] = [];
        for (const key of this.#gateways) {
          if (!this.#active) break;
          try {
            const outcome = await this.#ensure(key, this.#drifted.delete(key) || pass);
            if (outcome !== undefined) outcomes.push(outcome);
          } catch (e) {
            this.#opts.log(`provision: Gateway ${key}: ${(e as Error).message}`);
          }
        }
        this.stats.passes++;
        if (this.#active) this.#opts.onOutcomes(outcomes);
      } while (this.#again && this.#active);
      this.#running = undefined;
    })();
  }

  /** Resolves when no pass is running (tests, shutdown). */
  async idle(): Promise<void> {
    while (this.#running !== undefined) await this.#running;
  }

  stop(): void {
    this.active = false;
  }

  /** Stops, and ends the watch of the provisioned objects. */
  async close(): Promise<void> {
    this.stop();
    await this.idle();
    await this.#watch.stop();
  }

  async #ensure(key: string, full: boolean): Promise<ProvisionOutcome | undefined> {
    const [namespace = "", name = ""] = key.split("/");
    const gateway = this.#view.object("Gateway", namespace, name) as unknown as Gateway | undefined;
    // Gone, or going: its objects go with it (garbage collection), nothing to write.
    if (gateway === undefined || gateway.metadata.uid === undefined) return undefined;
    if ((gateway.metadata as { deletionTimestamp?: string }).deletionTimestamp !== undefined) return undefined;
    const gatewayClass = this.#view.object("GatewayClass", undefined, gateway.spec.gatewayClassName) as unknown as
      | GatewayClass
      | undefined;
    const lookup = (ns: string, n: string) =>
      this.#view.object("GwParameters", ns, n) as unknown as GwParameters | undefined;
    const params = effectiveParameters(gateway, gatewayClass, lookup);
    const rendered = renderProxy(gateway, params, this.#opts.settings);
    this.#owners.set(`${namespace}/${proxyName(name)}`, key);
    this.#owners.set(`${namespace}/${sessionKeySecretName(name)}`, key);
    const problems = [...rendered.problems];
    const outcome = (applied: boolean): ProvisionOutcome => ({
      gateway: key,
      problems,
      applied,
      sources: params.sources,
    });
    if (problems.some((p) => p.severity === "error")) {
      this.stats.refusals++;
      return outcome(false);
    }
    const hash = createHash("sha256").update(JSON.stringify(rendered.objects)).digest("hex");
    const known = this.#applied.get(key) === hash;
    if (known && !full) {
      this.stats.unchanged++;
      return outcome(true);
    }
    // The API server checks every object first (an overlay may make one it refuses): all or nothing.
    for (const o of known ? [] : rendered.objects) {
      try {
        await this.#apply(o, true);
      } catch (e) {
        const kind = String(o["kind"]);
        const field = OVERLAY_OF[kind];
        const message = refusal(e);
        if (message === undefined) throw e;
        const from = [...params.overlays].reverse().find((s) => s.field === field)?.from;
        problems.push({
          severity: "error",
          path: field !== undefined && from !== undefined ? `spec.${field}` : "",
          message: `the API server refuses the ${kind} this makes: ${message.replace(/^PATCH \S+: /, "")}`,
          ...(from !== undefined ? { parameters: from } : {}),
        });
      }
    }
    if (problems.some((p) => p.severity === "error")) {
      this.stats.refusals++;
      return outcome(false);
    }
    await this.#ensureSessionKey(rendered.sessionKeySecret, full);
    for (const o of rendered.objects) await this.#apply(o, false);
    this.#applied.set(key, hash);
    const kinds = rendered.objects.map((o) => String(o["kind"])).sort();
    if (this.#lastKinds.get(key) !== kinds.join(",")) {
      await this.#deleteUnwanted(namespace, proxyName(name), new Set(kinds));
      this.#lastKinds.set(key, kinds.join(","));
    }
    return outcome(true);
  }

  async #apply(o: ObjectJson, dryRun: boolean): Promise<void> {
    const kind = String(o["kind"]);
    const r = PROVISIONED_KINDS[kind];
    if (r === undefined) throw new Error(`provision: no REST path for ${kind}`);
    const meta = o["metadata"] as { name: string; namespace: string };
    const written = await this.#client.request<KubeObject>("PATCH", resourcePath(r, meta.namespace, meta.name), {
      body: o,
      contentType: "application/apply-patch+yaml",
      query: {
        fieldManager: PROVISION_FIELD_MANAGER,
        force: true,
        fieldValidation: "Strict",
        ...(dryRun ? { dryRun: "All" } : {}),
      },
    });
    if (dryRun) return;
    this.stats.applies++;
    const rv = written?.metadata.resourceVersion;
    if (rv !== undefined) this.#written.set(`${kind}/${meta.namespace}/${meta.name}`, rv);
  }

  /**
   * Created with a random key when missing; an existing one is never written. On a full pass the API server is asked
   * (the view may not have seen a deletion yet).
   */
  async #ensureSessionKey(secret: ObjectJson, full: boolean): Promise<void> {
    const meta = secret["metadata"] as { name: string; namespace: string };
    const r = PROVISIONED_KINDS["Secret"] as Resource;
    if (!full && this.#view.object("Secret", meta.namespace, meta.name) !== undefined) return;
    try {
      await this.#client.get(resourcePath(r, meta.namespace, meta.name));
      return;
    } catch (e) {
      if (!isKubeError(e, 404)) throw e;
    }
    // 32 random bytes in base64: the pod's SESSION_KEY is printable (and `data` holds that text in base64 again).
    const key = randomBytes(32).toString("base64");
    const body = { ...secret, data: { [SESSION_KEY_KEY]: Buffer.from(key).toString("base64") } };
    try {
      const created = await this.#client.request<KubeObject>("POST", resourcePath(r, meta.namespace), { body });
      const rv = created?.metadata.resourceVersion;
      if (rv !== undefined) this.#written.set(`Secret/${meta.namespace}/${meta.name}`, rv);
      this.#opts.log(`provision: created the session key Secret ${meta.namespace}/${meta.name}`);
    } catch (e) {
      if (!isKubeError(e, 409)) throw e;
    }
  }

  async #deleteUnwanted(namespace: string, name: string, wanted: ReadonlySet<string>): Promise<void> {
    for (const kind of OPTIONAL_KINDS) {
      if (wanted.has(kind)) continue;
      const r = PROVISIONED_KINDS[kind] as Resource;
      const path = resourcePath(r, namespace, name);
      let existing: KubeObject;
      try {
        existing = await this.#client.get<KubeObject>(path);
      } catch (e) {
        if (isKubeError(e, 404)) continue;
        throw e;
      }
      // Only what Sluice made (a user's object of the same name is not ours to delete).
      if (existing.metadata.labels?.["app.kubernetes.io/managed-by"] !== "sluice") continue;
      try {
        this.#written.set(`${kind}/${namespace}/${name}`, "");
        await this.#client.request("DELETE", path);
        this.#opts.log(`provision: deleted ${kind} ${namespace}/${name}, no longer asked for`);
      } catch (e) {
        if (!isKubeError(e, 404)) throw e;
      }
    }
  }
}
