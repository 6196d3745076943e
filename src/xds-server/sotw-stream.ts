// State-of-the-world ADS (StreamAggregatedResources). Each request carries the full subscription for its type; each
// response carries every subscribed resource of the type. The version of a response is the hash of exactly what it
// carries, so a client (or a reconnecting one, which sends the version it holds) that already has it gets nothing.
import { create } from "@bufbuild/protobuf";
import { AnySchema } from "@bufbuild/protobuf/wkt";
import {
  type DiscoveryRequest,
  type DiscoveryResponse,
  DiscoveryResponseSchema,
} from "../gen/envoy/service/discovery/v3/discovery_pb.js";
import { setVersion, type XdsResource } from "./resource.js";
import { resourcesOf, type Snapshot } from "./snapshot.js";
import { StreamBase, type StreamDeps, type StreamPeer } from "./stream-base.js";
import { isKnownType, isWildcardType, shortTypeName } from "./type-urls.js";

interface SotwSubscription {
  wildcard: boolean;
  names: Set<string>;
  /** The client has sent a non-empty resource_names for this type: an empty list no longer means wildcard. */
  everNamed: boolean;
  /** version_info of the client's latest request: what it holds now. */
  clientVersion: string;
}

export class SotwStream extends StreamBase {
  readonly #send: (response: DiscoveryResponse) => void;
  readonly #subscriptions = new Map<string, SotwSubscription>();

  constructor(deps: StreamDeps, id: number, send: (response: DiscoveryResponse) => void, peer?: StreamPeer) {
    super(deps, "sotw", id, peer);
    this.#send = send;
  }

  onRequest(request: DiscoveryRequest): void {
    this.guard(() => this.#onRequest(request));
  }

  #onRequest(request: DiscoveryRequest): void {
    if (this.closed || !this.bindNode(request.node)) return;
    const typeUrl = request.typeUrl;
    if (typeUrl === "") {
      this.deps.logger.warn("ignoring request without type_url (ADS requires it)", { node: this.nodeId });
      return;
    }
    const reply = this.classifyReply(typeUrl, request.responseNonce, request.errorDetail);
    // A stale request is superseded by the client's answer to our newer response, which carries its full state.
    if (reply === "stale") return;

    let sub = this.#subscriptions.get(typeUrl);
    if (!sub) {
      sub = { wildcard: false, names: new Set(), everNamed: false, clientVersion: "" };
      this.#subscriptions.set(typeUrl, sub);
      if (!isKnownType(typeUrl)) this.deps.logger.info("not serving unknown type", { type: typeUrl });
    }
    const names = request.resourceNames;
    if (names.length > 0) sub.everNamed = true;
    // "*" subscribes to everything; an empty list does too, for LDS/CDS, until the client has named something.
    sub.wildcard = names.includes("*") || (!sub.everNamed && isWildcardType(typeUrl));
    sub.names = new Set(names.filter((n) => n !== "*"));
    sub.clientVersion = request.versionInfo;
    // A client resuming on a new stream says what it holds; status shows it as acknowledged.
    if (reply === "initial" && request.versionInfo !== "") this.progressOf(typeUrl).ackedVersion = request.versionInfo;

    const snapshot = this.snapshot();
    if (snapshot) this.respond(typeUrl, snapshot);
  }

  protected respond(typeUrl: string, snapshot: Snapshot): void {
    const sub = this.#subscriptions.get(typeUrl);
    const progress = this.progress.get(typeUrl);
    if (!sub || !progress || progress.inFlight || !isKnownType(typeUrl)) return;

    const all = resourcesOf(snapshot, typeUrl);
    const selected: XdsResource[] = sub.wildcard
      ? [...all.values()]
      : [...sub.names].flatMap((name) => {
          const r = all.get(name);
          return r ? [r] : [];
        });
    if (!sub.wildcard) {
      if (sub.names.size === 0) return;
      // For EDS/RDS/SDS an absent resource means nothing, so an empty response would be noise; for LDS/CDS it
      // tells the client the resources it named do not exist (or no longer do).
      if (selected.length === 0 && !isWildcardType(typeUrl)) return;
    }
    const version = setVersion(selected);
    if (version === sub.clientVersion) return;
    if (this.deps.tracker.isNacked(this.nodeId, typeUrl, version)) {
      this.deps.logger.debug("holding back a version this node rejected", {
        node: this.nodeId,
        type: shortTypeName(typeUrl),
        version,
      });
      return;
    }

    selected.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    const nonce = this.nextNonce();
    this.markSent(typeUrl, version, nonce);
    this.#send(
      create(DiscoveryResponseSchema, {
        versionInfo: version,
        typeUrl,
        nonce,
        resources: selected.map((r) => create(AnySchema, { typeUrl: r.typeUrl, value: r.value })),
        controlPlane: { identifier: "sluice" },
      }),
    );
  }
}
