// Incremental ADS (DeltaAggregatedResources). The server keeps, per type, which version of each resource the client
// holds; a response carries only resources whose version differs and the names that went away. A reconnecting client
// tells what it holds in initial_resource_versions, so only the difference is sent.
import { create } from "@bufbuild/protobuf";
import { AnySchema } from "@bufbuild/protobuf/wkt";
import {
  type DeltaDiscoveryRequest,
  type DeltaDiscoveryResponse,
  DeltaDiscoveryResponseSchema,
  ResourceSchema,
} from "../gen/envoy/service/discovery/v3/discovery_pb.js";
import { setVersion, type XdsResource } from "./resource.js";
import { resourcesOf, type Snapshot } from "./snapshot.js";
import { StreamBase, type StreamDeps } from "./stream-base.js";
import { isKnownType, isWildcardType, shortTypeName } from "./type-urls.js";

interface DeltaTypeState {
  wildcard: boolean;
  /** Names subscribed explicitly (besides any wildcard). */
  names: Set<string>;
  /** Resource versions the client holds, as far as we know. */
  known: Map<string, string>;
  /** Subscribed names we told the client do not exist (in removed_resources), so we tell it once. */
  toldAbsent: Set<string>;
  /** `known` entries as they were before the response in flight, restored if the client rejects it. */
  revert: Map<string, string | undefined> | undefined;
}

function byName(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

export class DeltaStream extends StreamBase {
  readonly #send: (response: DeltaDiscoveryResponse) => void;
  readonly #states = new Map<string, DeltaTypeState>();

  constructor(deps: StreamDeps, id: number, send: (response: DeltaDiscoveryResponse) => void) {
    super(deps, "delta", id);
    this.#send = send;
  }

  onRequest(request: DeltaDiscoveryRequest): void {
    this.guard(() => this.#onRequest(request));
  }

  #onRequest(request: DeltaDiscoveryRequest): void {
    if (this.closed || !this.bindNode(request.node)) return;
    const typeUrl = request.typeUrl;
    if (typeUrl === "") {
      this.deps.logger.warn("ignoring delta request without type_url (ADS requires it)", { node: this.nodeId });
      return;
    }
    let state = this.#states.get(typeUrl);
    const first = state === undefined;
    if (!state) {
      state = { wildcard: false, names: new Set(), known: new Map(), toldAbsent: new Set(), revert: undefined };
      this.#states.set(typeUrl, state);
      if (!isKnownType(typeUrl)) this.deps.logger.info("not serving unknown type", { type: typeUrl });
    }

    const reply = this.classifyReply(typeUrl, request.responseNonce, request.errorDetail);
    if (reply === "nack" && state.revert) {
      // The client kept its previous resources: make our view match, so the next change resends them.
      for (const [name, version] of state.revert) {
        if (version === undefined) state.known.delete(name);
        else state.known.set(name, version);
      }
    }
    if (reply === "ack" || reply === "nack") state.revert = undefined;

    // Unlike SotW, subscription changes are honoured even with a stale nonce: the client will not repeat them.
    for (const name of request.resourceNamesSubscribe) {
      if (name === "*") {
        state.wildcard = true;
        continue;
      }
      state.names.add(name);
      state.toldAbsent.delete(name);
      // A subscribe must be answered with the resource even if we think the client has it (it may have forgotten
      // it), except on the first request, where initial_resource_versions says exactly what it holds.
      if (!first) state.known.delete(name);
    }
    for (const name of request.resourceNamesUnsubscribe) {
      if (name === "*") {
        state.wildcard = false;
        continue;
      }
      state.names.delete(name);
      state.toldAbsent.delete(name);
      state.known.delete(name);
    }
    if (first) {
      // Legacy wildcard: LDS/CDS with no names on the stream's first request for the type.
      const legacyWildcard =
        request.resourceNamesSubscribe.length === 0 &&
        request.resourceNamesUnsubscribe.length === 0 &&
        isWildcardType(typeUrl);
      if (legacyWildcard) state.wildcard = true;
      for (const [name, version] of Object.entries(request.initialResourceVersions)) {
        if (state.wildcard || state.names.has(name)) state.known.set(name, version);
      }
      // A reconnecting client holds these: status shows them as acknowledged (equal to ours when nothing changed).
      if (state.known.size > 0) {
        const held = [...state.known].map(([name, version]) => ({ name, version }));
        this.progressOf(typeUrl).ackedVersion = setVersion(held);
      }
    }

    const snapshot = this.snapshot();
    if (snapshot) this.respond(typeUrl, snapshot);
  }

  protected respond(typeUrl: string, snapshot: Snapshot): void {
    const state = this.#states.get(typeUrl);
    const progress = this.progress.get(typeUrl);
    if (!state || !progress || progress.inFlight || !isKnownType(typeUrl)) return;

    const all = resourcesOf(snapshot, typeUrl);
    const desired = new Map<string, XdsResource>();
    if (state.wildcard) for (const [name, r] of all) desired.set(name, r);
    for (const name of state.names) {
      const r = all.get(name);
      if (r) desired.set(name, r);
    }

    const updated = [...desired.values()]
      .filter((r) => state.known.get(r.name) !== r.version)
      .sort((a, b) => byName(a.name, b.name));
    const removed = [...state.known.keys()].filter((name) => !desired.has(name));
    // Subscribed names that do not exist: saying so lets the client stop waiting for them (no 15 s timeout).
    const absent = [...state.names].filter(
      (name) => !desired.has(name) && !state.known.has(name) && !state.toldAbsent.has(name),
    );
    if (updated.length === 0 && removed.length === 0 && absent.length === 0) return;

    const version = setVersion(desired.values());
    if (this.deps.tracker.isNacked(this.nodeId, typeUrl, version)) {
      this.deps.logger.debug("holding back a version this node rejected", {
        node: this.nodeId,
        type: shortTypeName(typeUrl),
        version,
      });
      return;
    }

    const revert = new Map<string, string | undefined>();
    for (const r of updated) {
      revert.set(r.name, state.known.get(r.name));
      state.known.set(r.name, r.version);
      state.toldAbsent.delete(r.name);
    }
    for (const name of removed) {
      revert.set(name, state.known.get(name));
      state.known.delete(name);
    }
    for (const name of [...removed, ...absent]) if (state.names.has(name)) state.toldAbsent.add(name);
    state.revert = revert;

    const nonce = this.nextNonce();
    this.markSent(typeUrl, version, nonce);
    this.#send(
      create(DeltaDiscoveryResponseSchema, {
        systemVersionInfo: version,
        typeUrl,
        nonce,
        resources: updated.map((r) =>
          create(ResourceSchema, {
            name: r.name,
            version: r.version,
            resource: create(AnySchema, { typeUrl: r.typeUrl, value: r.value }),
          }),
        ),
        removedResources: [...removed, ...absent].sort(byName),
        controlPlane: { identifier: "sluice" },
      }),
    );
  }
}
