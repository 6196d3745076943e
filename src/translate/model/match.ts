// `match.model` of a GwModel: exact name, suffix wildcard (`gpt-*`), prefix wildcard (`*-latest`) or `*`, and the
// precedence among the models of one listener. Pure; the LLM ext_proc uses the same functions at request time.

export type ModelMatch =
  | { readonly kind: "exact"; readonly literal: string }
  /** `gpt-*`: the literal is what the name starts with. */
  | { readonly kind: "suffixWildcard"; readonly literal: string }
  /** `*-latest`: the literal is what the name ends with. */
  | { readonly kind: "prefixWildcard"; readonly literal: string }
  | { readonly kind: "any"; readonly literal: "" };

/**
 * The match of a pattern as written (`metadata.name` when `match.model` is omitted). A `*` anywhere but at one end
 * is a literal character: the schema allows any string, and only these four forms are wildcards.
 */
export function parseModelMatch(pattern: string): ModelMatch {
  if (pattern === "*") return { kind: "any", literal: "" };
  if (pattern.length > 1 && pattern.endsWith("*") && !pattern.slice(0, -1).includes("*")) {
    return { kind: "suffixWildcard", literal: pattern.slice(0, -1) };
  }
  if (pattern.length > 1 && pattern.startsWith("*") && !pattern.slice(1).includes("*")) {
    return { kind: "prefixWildcard", literal: pattern.slice(1) };
  }
  return { kind: "exact", literal: pattern };
}

export function isWildcard(m: ModelMatch): boolean {
  return m.kind !== "exact";
}

/** The pattern as a user wrote it. */
export function formatModelMatch(m: ModelMatch): string {
  switch (m.kind) {
    case "exact":
      return m.literal;
    case "suffixWildcard":
      return `${m.literal}*`;
    case "prefixWildcard":
      return `*${m.literal}`;
    case "any":
      return "*";
  }
}

export function modelMatches(m: ModelMatch, name: string): boolean {
  switch (m.kind) {
    case "exact":
      return name === m.literal;
    case "suffixWildcard":
      return name.startsWith(m.literal);
    case "prefixWildcard":
      return name.endsWith(m.literal);
    case "any":
      return true;
  }
}

/** What orders two models matching the same name: the match, then the older resource, then namespace/name. */
export interface RankedModel {
  readonly match: ModelMatch;
  /** RFC 3339 `metadata.creationTimestamp`; absent (files) sorts after every present one. */
  readonly createdAt?: string;
  /** `namespace/name`. */
  readonly id: string;
}

const rank = (m: ModelMatch): number => (m.kind === "exact" ? 0 : m.kind === "any" ? 2 : 1);

/**
 * Negative when `a` wins: exact > the wildcard with the longest literal part (a suffix and a prefix wildcard of equal
 * length tie) > `*`; ties go to the older resource, then to the smaller `namespace/name`.
 */
export function compareModelPrecedence(a: RankedModel, b: RankedModel): number {
  const r = rank(a.match) - rank(b.match);
  if (r !== 0) return r;
  const len = b.match.literal.length - a.match.literal.length;
  if (len !== 0) return len;
  if (a.createdAt !== b.createdAt) {
    if (a.createdAt === undefined) return 1;
    if (b.createdAt === undefined) return -1;
    return a.createdAt < b.createdAt ? -1 : 1;
  }
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}
