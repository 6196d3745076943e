// Status written by the translator, through these helpers only. Condition types and reasons are the Gateway API's
// own (a closed set) plus those of src/api/status.ts for the Sluice kinds. Unlike src/api/status.ts these conditions
// carry no lastTransitionTime: the translator is a pure function with timestamp-free golden output, and a status
// writer adds the time when it writes to an API server.

export type ConditionStatus = "True" | "False" | "Unknown";

export interface Condition {
  readonly type: string;
  readonly status: ConditionStatus;
  readonly reason: string;
  readonly message: string;
}

export const GatewayConditionReason = {
  Accepted: "Accepted",
  InvalidParameters: "InvalidParameters",
  Programmed: "Programmed",
  Invalid: "Invalid",
  ListenersNotValid: "ListenersNotValid",
} as const;

export const ListenerConditionReason = {
  Accepted: "Accepted",
  PortUnavailable: "PortUnavailable",
  UnsupportedProtocol: "UnsupportedProtocol",
  ProtocolConflict: "ProtocolConflict",
  HostnameConflict: "HostnameConflict",
  ResolvedRefs: "ResolvedRefs",
  InvalidCertificateRef: "InvalidCertificateRef",
  InvalidRouteKinds: "InvalidRouteKinds",
  RefNotPermitted: "RefNotPermitted",
  Programmed: "Programmed",
  Invalid: "Invalid",
} as const;

export const RouteConditionReason = {
  Accepted: "Accepted",
  NotAllowedByListeners: "NotAllowedByListeners",
  NoMatchingListenerHostname: "NoMatchingListenerHostname",
  NoMatchingParent: "NoMatchingParent",
  UnsupportedValue: "UnsupportedValue",
  ResolvedRefs: "ResolvedRefs",
  RefNotPermitted: "RefNotPermitted",
  InvalidKind: "InvalidKind",
  BackendNotFound: "BackendNotFound",
} as const;

export function condition(type: string, ok: boolean, reason: string, message: string): Condition {
  return { type, status: ok ? "True" : "False", reason, message };
}

export interface ResourceStatus {
  readonly kind: string;
  readonly namespace: string;
  readonly name: string;
  readonly status: unknown;
}
