// What the server knows about its clients beyond one stream: counters for metrics, the last NACK per node and type
// (kept across reconnects, so a version a node rejected is not pushed to it again), and the live streams for status.

export type StreamKind = "sotw" | "delta";

export interface NackRecord {
  /** The version the node rejected. */
  readonly version: string;
  readonly nonce: string;
  /** The client's `error_detail.message`. */
  readonly message: string;
  readonly at: Date;
}

export interface TypeStatus {
  readonly typeUrl: string;
  readonly sentVersion: string | undefined;
  readonly sentNonce: string | undefined;
  readonly ackedVersion: string | undefined;
  /** Last NACK of this type by this node, on this stream or an earlier one. */
  readonly lastNack: NackRecord | undefined;
  /** Delta: names in the latest response, changed and removed (shows that one change sent one virtual host). */
  readonly lastSent?: { readonly resources: readonly string[]; readonly removed: readonly string[] } | undefined;
}

export interface StreamStatus {
  readonly streamId: number;
  readonly nodeId: string;
  readonly group: string;
  /** The Gateway the client's certificate names, on a server that authenticates its clients (mutual TLS). */
  readonly identity?: string;
  readonly kind: StreamKind;
  readonly connectedAt: Date;
  readonly types: readonly TypeStatus[];
}

/** A stream the server refused: its client certificate names no Gateway, or another Gateway than its node asks for. */
export interface RefusalRecord {
  readonly at: Date;
  /** The client's address (grpc-js `getPeer()`). */
  readonly peer: string;
  /** The Gateway the client certificate names, if any. */
  readonly identity: string | undefined;
  /** The node, when the refusal came after its first request. */
  readonly nodeId: string | undefined;
  readonly group: string | undefined;
  /** As sent to the client with PERMISSION_DENIED. */
  readonly message: string;
}

/** Refusals kept for status: the latest ones. */
const REFUSALS_KEPT = 20;

export interface XdsCounters {
  /** Responses sent. */
  pushes: number;
  acks: number;
  nacks: number;
  /** Streams open now. */
  connectedStreams: number;
  /** Streams opened since start. */
  streamsTotal: number;
  /** Streams refused with PERMISSION_DENIED (client identity and node group disagree). */
  refused: number;
}

/** What one Envoy (node id) was sent and answered, for per-Envoy metrics. */
export interface NodeCounters {
  group: string;
  pushes: number;
  acks: number;
  /** By short type name (Listener, Cluster, ...). */
  readonly nacks: Map<string, number>;
}

export interface XdsServerStatus {
  /** Streams whose node is known (it sent its first request), by stream id. */
  readonly streams: readonly StreamStatus[];
  readonly counters: Readonly<XdsCounters>;
  /** The latest refused streams, oldest first. */
  readonly refusals: readonly RefusalRecord[];
}

export interface StatusSource {
  status(): StreamStatus | undefined;
}

export class XdsTracker {
  readonly counters: XdsCounters = { pushes: 0, acks: 0, nacks: 0, connectedStreams: 0, streamsTotal: 0, refused: 0 };
  readonly #refusals: RefusalRecord[] = [];
  readonly #nacks = new Map<string, Map<string, NackRecord>>();
  readonly #streams = new Set<StatusSource>();
  /** Per node id, kept after its streams close (counters do not go back). */
  readonly byNode = new Map<string, NodeCounters>();

  #node(nodeId: string, group: string): NodeCounters {
    let n = this.byNode.get(nodeId);
    if (n === undefined) {
      n = { group, pushes: 0, acks: 0, nacks: new Map() };
      this.byNode.set(nodeId, n);
    }
    if (group !== "") n.group = group;
    return n;
  }

  recordPush(nodeId: string, group = ""): void {
    this.counters.pushes++;
    this.#node(nodeId, group).pushes++;
  }

  recordAck(nodeId: string, group = ""): void {
    this.counters.acks++;
    this.#node(nodeId, group).acks++;
  }

  /** Told of every NACK (the controller records a Kubernetes Event on the Gateway). */
  readonly nackListeners: ((nack: { nodeId: string; group: string; typeUrl: string; record: NackRecord }) => void)[] =
    [];

  recordNack(nodeId: string, typeUrl: string, record: NackRecord, group = ""): void {
    for (const l of this.nackListeners) l({ nodeId, group, typeUrl, record });
    let byType = this.#nacks.get(nodeId);
    if (!byType) {
      byType = new Map();
      this.#nacks.set(nodeId, byType);
    }
    byType.set(typeUrl, record);
    this.counters.nacks++;
    const nacks = this.#node(nodeId, group).nacks;
    const type = typeUrl.slice(typeUrl.lastIndexOf(".") + 1);
    nacks.set(type, (nacks.get(type) ?? 0) + 1);
  }

  lastNack(nodeId: string, typeUrl: string): NackRecord | undefined {
    return this.#nacks.get(nodeId)?.get(typeUrl);
  }

  /** True when `nodeId` rejected exactly this version of `typeUrl` last time: sending it again would be rejected again. */
  isNacked(nodeId: string, typeUrl: string, version: string): boolean {
    return this.lastNack(nodeId, typeUrl)?.version === version;
  }

  recordRefusal(record: RefusalRecord): void {
    this.counters.refused++;
    this.#refusals.push(record);
    if (this.#refusals.length > REFUSALS_KEPT) this.#refusals.shift();
  }

  streamOpened(stream: StatusSource): void {
    this.#streams.add(stream);
    this.counters.connectedStreams++;
    this.counters.streamsTotal++;
  }

  streamClosed(stream: StatusSource): void {
    if (this.#streams.delete(stream)) this.counters.connectedStreams--;
  }

  status(): XdsServerStatus {
    const streams = [...this.#streams]
      .map((s) => s.status())
      .filter((s): s is StreamStatus => s !== undefined)
      .sort((a, b) => a.streamId - b.streamId);
    return { streams, counters: { ...this.counters }, refusals: [...this.#refusals] };
  }
}
