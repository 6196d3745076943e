// Gateway API match precedence across every rule attached to one host name:
// exact path, then regular expression, then the longest prefix; then method; then more header matches; then more
// query matches; ties go to the oldest route, then `namespace/name` order, then rule and match order.

import type { RouteMatchIR } from "../ir.js";

export interface RankedMatch {
  readonly match: RouteMatchIR;
  readonly routeCreated: string;
  readonly routeKey: string;
  readonly rule: number;
  readonly matchIndex: number;
}

const PATH_RANK = { Exact: 3, RegularExpression: 2, PathPrefix: 1 } as const;

export function compareMatches(a: RankedMatch, b: RankedMatch): number {
  const pa = a.match.path;
  const pb = b.match.path;
  return (
    PATH_RANK[pb.type] - PATH_RANK[pa.type] ||
    pb.value.length - pa.value.length ||
    Number(b.match.method !== undefined) - Number(a.match.method !== undefined) ||
    b.match.headers.length - a.match.headers.length ||
    b.match.queryParams.length - a.match.queryParams.length ||
    (a.routeCreated < b.routeCreated ? -1 : a.routeCreated > b.routeCreated ? 1 : 0) ||
    (a.routeKey < b.routeKey ? -1 : a.routeKey > b.routeKey ? 1 : 0) ||
    a.rule - b.rule ||
    a.matchIndex - b.matchIndex
  );
}
