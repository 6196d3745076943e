// Which snapshot a node gets. One group per Gateway: the Envoy bootstrap Sluice generates names its Gateway in node
// metadata; other clients fall back to their cluster, then their id.
import type { Node } from "../gen/envoy/config/core/v3/base_pb.js";

export const GATEWAY_METADATA_KEY = "sluice.dev/gateway";

export function nodeGroup(node: Pick<Node, "id" | "cluster" | "metadata">): string {
  const gateway = node.metadata?.[GATEWAY_METADATA_KEY];
  if (typeof gateway === "string" && gateway !== "") return gateway;
  if (node.cluster !== "") return node.cluster;
  return node.id;
}
