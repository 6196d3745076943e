// Incremental ADS (DeltaAggregatedResources). The server keeps, per type, which version of each resource the client
// holds; a response carries only resources whose version differs and the names that went away. A reconnecting client
// tells what it holds in initial_resource_versions, so only the difference is sent.
//
// Envoys get RouteConfigurations without virtual hosts and fetch VirtualHosts (VHDS). Envoy matches a virtual host to
// its route configuration by namespace (the name before the last '/': `<route configuration>/<hostname>`) but does
// not tell the server the namespaces: its VHDS request names nothing (a wildcard; new_grpc_mux_impl.cc). So a client
// is sent the virtual hosts of the route configurations it holds, and all of a route configuration's virtual hosts
// again whenever it is sent a route configuration it did not hold (Envoy then starts a new VHDS watch, which sees
// only what arrives after it).
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
import { StreamBase, type StreamDeps, type StreamPeer } from "./stream-base.js";
import {
  isKnownType,
  isNamespacedType,
  isWildcardType,
  namespaceOf,
  ROUTE_TYPE,
  shortTypeName,
  VIRTUAL_HOST_TYPE,
} from "./type-urls.js";

interface DeltaTypeState {
  wildcard: boolean;
  /** Names subscribed explicitly (besides any wildcard); for a namespaced type, also namespaces. */
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

/** Whether `name` is subscribed: by wildcard, by name, or (namespaced types) by its namespace. */
function subscribed(state: DeltaTypeState, typeUrl: string, name: string): boolean {
  return state.wildcard || state.names.has(name) || (isNamespacedType(typeUrl) && state.names.has(namespaceOf(name)));
}

/** Forgets what the client holds under `name`: the resource, or (namespaced types) every resource of the namespace. */
function forgetKnown(state: DeltaTypeState, typeUrl: string, name: string): void {
  state.known.delete(name);
  if (!isNamespacedType(typeUrl)) return;
  for (const held of [...state.known.keys()]) if (namespaceOf(held) === name) state.known.delete(held);
}

/** Whether any of `names` is in namespace `ns`. */
function inNamespace(ns: string, names: Iterable<string>): boolean {
  for (const n of names) if (namespaceOf(n) === ns) return true;
  return false;
}

export class DeltaStream extends StreamBase {
  readonly #send: (response: DeltaDiscoveryResponse) => void;
  readonly #states = new Map<string, DeltaTypeState>();
  /** Serve RouteConfigurations in their VHDS form (decided when the node is known: Envoy only). */
  #vhds = false;

  constructor(deps: StreamDeps, id: number, send: (response: DeltaDiscoveryResponse) => void, peer?: StreamPeer) {
    super(deps, "delta", id, peer);
    this.#send = send;
  }

  onRequest(request: DeltaDiscoveryRequest): void {
    this.guard(() => this.#onRequest(request));
  }

  #onRequest(request: DeltaDiscoveryRequest): void {
    if (this.closed || !this.bindNode(request.node)) return;
    // Envoy implements VHDS; other xDS clients (gRPC) do not, and get whole RouteConfigurations.
    this.#vhds = this.deps.vhds && this.userAgentName === "envoy";
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
      if (!first) forgetKnown(state, typeUrl, name);
    }
    for (const name of request.resourceNamesUnsubscribe) {
      if (name === "*") {
        state.wildcard = false;
        continue;
      }
      state.names.delete(name);
      state.toldAbsent.delete(name);
      forgetKnown(state, typeUrl, name);
    }
    if (first) {
      // Legacy wildcard: LDS/CDS with no names on the stream's first request for the type.
      const legacyWildcard =
        request.resourceNamesSubscribe.length === 0 &&
        request.resourceNamesUnsubscribe.length === 0 &&
        (isWildcardType(typeUrl) || isNamespacedType(typeUrl));
      if (legacyWildcard) state.wildcard = true;
      for (const [name, version] of Object.entries(request.initialResourceVersions)) {
        if (subscribed(state, typeUrl, name)) state.known.set(name, version);
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

  /** Names of the route configurations this client holds (or is being sent) in their VHDS form. */
  #vhdsRoutesHeld(snapshot: Snapshot): Set<string> {
    const held = new Set<string>();
    if (!this.#vhds) return held;
    for (const name of this.#states.get(ROUTE_TYPE)?.known.keys() ?? [])
      if (snapshot.vhdsRoutes.has(name)) held.add(name);
    return held;
  }

  /** The client's VHDS watch for route configuration `name` is new or gone: it holds none of its virtual hosts. */
  #forgetVirtualHosts(name: string): void {
    const state = this.#states.get(VIRTUAL_HOST_TYPE);
    if (!state) return;
    forgetKnown(state, VIRTUAL_HOST_TYPE, name);
    state.toldAbsent.delete(name);
  }

  /** The resources of `typeUrl` this client is served: for Envoys, RouteConfigurations in their VHDS form. */
  #served(typeUrl: string, snapshot: Snapshot): ReadonlyMap<string, XdsResource> {
    const all = resourcesOf(snapshot, typeUrl);
    if (typeUrl !== ROUTE_TYPE || !this.#vhds || snapshot.vhdsRoutes.size === 0) return all;
    const served = new Map(all);
    for (const [name, r] of snapshot.vhdsRoutes) if (served.has(name)) served.set(name, r);
    return served;
  }

  protected respond(typeUrl: string, snapshot: Snapshot): void {
    const state = this.#states.get(typeUrl);
    const progress = this.progress.get(typeUrl);
    if (!state || !progress || progress.inFlight || !isKnownType(typeUrl)) return;

    const all = this.#served(typeUrl, snapshot);
    const desired = new Map<string, XdsResource>();
    // Virtual hosts go only with a route configuration the client holds (in their VHDS form: a whole one has them).
    const held = typeUrl === VIRTUAL_HOST_TYPE ? this.#vhdsRoutesHeld(snapshot) : undefined;
    if (state.wildcard || isNamespacedType(typeUrl)) {
      for (const [name, r] of all) {
        if (subscribed(state, typeUrl, name) && (held === undefined || held.has(namespaceOf(name))))
          desired.set(name, r);
      }
    }
    for (const name of state.names) {
      const r = all.get(name);
      if (r) desired.set(name, r);
    }

    const updated = [...desired.values()]
      .filter((r) => state.known.get(r.name) !== r.version)
      .sort((a, b) => byName(a.name, b.name));
    const removed = [...state.known.keys()].filter((name) => !desired.has(name));
    // Subscribed names that do not exist: saying so lets the client stop waiting for them (no 15 s timeout). A
    // namespace is absent while it has no resources: Envoy's VHDS then sees its name removed and stops waiting.
    const absent = [...new Set([...state.names, ...(held ?? [])])].filter(
      (name) =>
        !desired.has(name) &&
        !state.known.has(name) &&
        !state.toldAbsent.has(name) &&
        !(isNamespacedType(typeUrl) && (inNamespace(name, desired.keys()) || inNamespace(name, state.known.keys()))),
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

    if (typeUrl === ROUTE_TYPE && this.#vhds) {
      for (const r of updated) if (!state.known.has(r.name)) this.#forgetVirtualHosts(r.name);
      for (const name of removed) this.#forgetVirtualHosts(name);
    }
    const revert = new Map<string, string | undefined>();
    for (const r of updated) {
      revert.set(r.name, state.known.get(r.name));
      state.known.set(r.name, r.version);
      state.toldAbsent.delete(r.name);
      if (isNamespacedType(typeUrl)) state.toldAbsent.delete(namespaceOf(r.name));
    }
    for (const name of removed) {
      revert.set(name, state.known.get(name));
      state.known.delete(name);
    }
    for (const name of [...removed, ...absent]) {
      if (state.names.has(name) || held?.has(name)) state.toldAbsent.add(name);
    }
    state.revert = revert;

    const nonce = this.nextNonce();
    this.markSent(typeUrl, version, nonce);
    this.progressOf(typeUrl).lastSent = {
      resources: updated.map((r) => r.name),
      removed: [...removed, ...absent].sort(byName),
    };
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
    // Route configurations the client did not hold need their virtual hosts, right after them.
    if (typeUrl === ROUTE_TYPE && this.#vhds) this.respond(VIRTUAL_HOST_TYPE, snapshot);
  }
}
