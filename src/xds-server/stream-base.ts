// What SotW and delta streams share: binding the node on its first request, the per-stream nonce counter, ACK/NACK
// bookkeeping per type, following the node group's snapshot, and status. The subclasses decide what to send.
import type { Node } from "../gen/envoy/config/core/v3/base_pb.js";
import type { Status } from "../gen/google/rpc/status_pb.js";
import type { XdsLogger } from "./logger.js";
import { nodeGroup } from "./node-group.js";
import type { Snapshot } from "./snapshot.js";
import type { SnapshotCache } from "./snapshot-cache.js";
import type { StatusSource, StreamKind, StreamStatus, XdsTracker } from "./tracker.js";
import { PUSH_ORDER, shortTypeName } from "./type-urls.js";

export interface StreamDeps {
  readonly cache: SnapshotCache;
  readonly tracker: XdsTracker;
  readonly logger: XdsLogger;
  /** Serve VHDS to Envoys on delta ADS (XdsServerOptions.vhds). */
  readonly vhds: boolean;
}

/** Who is at the other end of a stream, on a server that authenticates its clients (mutual TLS). */
export interface StreamPeer {
  /** The Gateway (node group) the client's certificate names: the only snapshot this stream may follow. */
  readonly gateway: string;
  /** The client's address, for logs and status. */
  readonly address: string;
  /** Ends the call with PERMISSION_DENIED and `message`. */
  refuse(message: string): void;
}

/** Per stream and type: the last response sent and what the client said about it. */
export interface TypeProgress {
  sentNonce: string | undefined;
  sentVersion: string | undefined;
  ackedVersion: string | undefined;
  /** A response was sent and its ACK/NACK has not arrived: hold further responses of this type until it does. */
  inFlight: boolean;
  /** Delta: names in the latest response. */
  lastSent?: { readonly resources: readonly string[]; readonly removed: readonly string[] };
}

/**
 * How a request relates to our responses of its type:
 * - "initial": no nonce (first request of the type, or a client-initiated subscription change);
 * - "stale": answers a response that a newer one superseded;
 * - "ack" / "nack": answers the latest response, for the first time;
 * - "repeat": carries the latest nonce again (e.g. a subscription change after the ACK).
 */
export type ReplyKind = "initial" | "stale" | "ack" | "nack" | "repeat";

export abstract class StreamBase implements StatusSource {
  readonly #deps: StreamDeps;
  readonly #kind: StreamKind;
  readonly #id: number;
  readonly #connectedAt = new Date();
  readonly #peer: StreamPeer | undefined;
  #node: { readonly id: string; readonly group: string; readonly userAgent: string } | undefined;
  #nonce = 0;
  #unwatch: (() => void) | undefined;
  #closed = false;
  protected readonly progress = new Map<string, TypeProgress>();

  /** `peer`: the authenticated client, whose node must belong to its Gateway; undefined on a plaintext server. */
  constructor(deps: StreamDeps, kind: StreamKind, id: number, peer?: StreamPeer) {
    this.#deps = deps;
    this.#kind = kind;
    this.#id = id;
    this.#peer = peer;
    deps.tracker.streamOpened(this);
  }

  protected get deps(): StreamDeps {
    return this.#deps;
  }

  protected get nodeId(): string {
    return this.#node?.id ?? "";
  }

  /** The node's user_agent_name ("envoy" for Envoy), once the node is known. */
  protected get userAgentName(): string {
    return this.#node?.userAgent ?? "";
  }

  protected get closed(): boolean {
    return this.#closed;
  }

  /** The node group's current snapshot, once the node is known. */
  protected snapshot(): Snapshot | undefined {
    return this.#node ? this.#deps.cache.getSnapshot(this.#node.group) : undefined;
  }

  /**
   * Binds the stream to its node on the first request (later requests may omit the node, per the protocol).
   * Returns false when the stream still has no node; the request is then ignored. On an authenticated stream, a node
   * of another group than the client certificate's Gateway ends the stream (PERMISSION_DENIED) before it follows any
   * snapshot.
   */
  protected bindNode(node: Node | undefined): boolean {
    if (this.#node) return true;
    if (!node) {
      this.#deps.logger.warn("ignoring request: the first request of a stream must carry the node", {
        stream: this.#id,
      });
      return false;
    }
    const group = nodeGroup(node);
    const peer = this.#peer;
    if (peer !== undefined && group !== peer.gateway) {
      const message = `the client certificate is Gateway ${peer.gateway}'s; node "${node.id}" asks for the configuration of ${group}`;
      this.#deps.tracker.recordRefusal({
        at: new Date(),
        peer: peer.address,
        identity: peer.gateway,
        nodeId: node.id,
        group,
        message,
      });
      this.#deps.logger.warn("stream refused (PERMISSION_DENIED)", {
        stream: this.#id,
        peer: peer.address,
        identity: peer.gateway,
        node: node.id,
        group,
      });
      this.close();
      peer.refuse(message);
      return false;
    }
    this.#node = { id: node.id, group, userAgent: node.userAgentName };
    this.#deps.logger.info("stream connected", { stream: this.#id, kind: this.#kind, node: node.id, group });
    this.#unwatch = this.#deps.cache.watch(group, (snapshot) => this.#onSnapshot(snapshot));
    return true;
  }

  protected nextNonce(): string {
    this.#nonce++;
    return String(this.#nonce);
  }

  protected progressOf(typeUrl: string): TypeProgress {
    let p = this.progress.get(typeUrl);
    if (!p) {
      p = { sentNonce: undefined, sentVersion: undefined, ackedVersion: undefined, inFlight: false };
      this.progress.set(typeUrl, p);
    }
    return p;
  }

  /** Classifies a request's nonce and records an ACK or NACK of our latest response (see ReplyKind). */
  protected classifyReply(typeUrl: string, nonce: string, errorDetail: Status | undefined): ReplyKind {
    const p = this.progressOf(typeUrl);
    if (nonce === "") return "initial";
    if (nonce !== p.sentNonce) {
      this.#deps.logger.debug("stale nonce", { stream: this.#id, type: shortTypeName(typeUrl), nonce });
      return "stale";
    }
    if (!p.inFlight) return "repeat";
    p.inFlight = false;
    const version = p.sentVersion ?? "";
    // Per the protocol, a NACK is told by error_detail, not by the version (which may legitimately differ).
    if (errorDetail) {
      const message = errorDetail.message;
      this.#deps.tracker.recordNack(
        this.nodeId,
        typeUrl,
        { version, nonce, message, at: new Date() },
        this.#node?.group,
      );
      this.#deps.logger.warn("configuration rejected (NACK)", {
        node: this.nodeId,
        group: this.#node?.group,
        type: shortTypeName(typeUrl),
        version,
        error: message,
      });
      return "nack";
    }
    p.ackedVersion = version;
    this.#deps.tracker.recordAck(this.nodeId, this.#node?.group);
    this.#deps.logger.debug("ACK", { node: this.nodeId, type: shortTypeName(typeUrl), version });
    return "ack";
  }

  /** Records a response about to be written. */
  protected markSent(typeUrl: string, version: string, nonce: string): void {
    const p = this.progressOf(typeUrl);
    p.sentNonce = nonce;
    p.sentVersion = version;
    p.inFlight = true;
    this.#deps.tracker.recordPush(this.nodeId, this.#node?.group);
    this.#deps.logger.debug("push", { node: this.nodeId, type: shortTypeName(typeUrl), version, nonce });
  }

  /** Sends whatever `typeUrl` needs given `snapshot`, if anything. */
  protected abstract respond(typeUrl: string, snapshot: Snapshot): void;

  /** Answers every requested type, in make-before-break order. Types outside PUSH_ORDER are never served. */
  #onSnapshot(snapshot: Snapshot): void {
    for (const typeUrl of PUSH_ORDER) {
      if (this.#closed) return;
      if (this.progress.has(typeUrl)) this.guard(() => this.respond(typeUrl, snapshot));
    }
  }

  /** Runs stream logic so that a bug is logged and never takes down the process or other streams. */
  protected guard(run: () => void): void {
    try {
      run();
    } catch (e) {
      this.#deps.logger.error("internal error in xDS stream", {
        stream: this.#id,
        node: this.nodeId,
        error: e instanceof Error ? (e.stack ?? e.message) : String(e),
      });
    }
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#unwatch?.();
    this.#deps.tracker.streamClosed(this);
    if (this.#node) this.#deps.logger.info("stream closed", { stream: this.#id, node: this.#node.id });
  }

  status(): StreamStatus | undefined {
    const node = this.#node;
    if (!node) return undefined;
    const types = [...this.progress]
      .map(([typeUrl, p]) => ({
        typeUrl,
        sentVersion: p.sentVersion,
        sentNonce: p.sentNonce,
        ackedVersion: p.ackedVersion,
        lastNack: this.#deps.tracker.lastNack(node.id, typeUrl),
        ...(p.lastSent !== undefined ? { lastSent: p.lastSent } : {}),
      }))
      .sort((a, b) => (a.typeUrl < b.typeUrl ? -1 : 1));
    return {
      streamId: this.#id,
      nodeId: node.id,
      group: node.group,
      ...(this.#peer !== undefined ? { identity: this.#peer.gateway } : {}),
      kind: this.#kind,
      connectedAt: this.#connectedAt,
      types,
    };
  }
}
