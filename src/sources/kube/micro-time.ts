// Kubernetes MicroTime (Lease acquireTime/renewTime, Event eventTime): RFC 3339 in UTC with exactly six fractional
// digits, which the API server parses with Go's RFC3339Micro layout.

/** `2026-01-02T03:04:05.123000Z`. JavaScript's wall clock has millisecond resolution: the last three digits are 0. */
export function microTime(epochMs: number = Date.now()): string {
  return new Date(Math.floor(epochMs)).toISOString().replace(/Z$/, "000Z");
}
