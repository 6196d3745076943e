// What the client sees of the targets' tools, prompts and resources: names prefixed with their target (prefixMode),
// resource URIs that carry their target, and the way back from what the client sends to a target and its own name.

import { createHash } from "node:crypto";

export type PrefixMode = "Conditional" | "Always" | "Never";

/** Between a target's name and an item's: target names are DNS labels (`[a-z0-9-]`), so the first `_` splits. */
export const PREFIX_SEPARATOR = "_";

/**
 * Longest name Sluice hands out. MCP allows 128 characters, but the function names of the common LLM APIs (OpenAI,
 * Anthropic, Gemini) stop at 64, and a client that passes MCP tools to them refuses or truncates longer ones. A
 * prefixed name over this is shortened, deterministically, to its first 57 characters, `_` and 6 hex digits of a
 * SHA-256 of the full prefixed name; calls with it are routed by lookup like any other (docs/mcp.md).
 */
export const MAX_NAME_CHARS = 64;

/** The scheme of resource URIs that carry their target: `sluice://<target>/<the target's own URI>`. */
const URI_PREFIX = "sluice://";

export function prefixes(mode: PrefixMode, targets: number): boolean {
  return mode === "Always" || (mode === "Conditional" && targets > 1);
}

/** Resource URIs carry their target whenever there is more than one target, whatever the prefix mode. */
export function routesUris(mode: PrefixMode, targets: number): boolean {
  return mode === "Always" || targets > 1;
}

export function shorten(name: string): string {
  if (name.length <= MAX_NAME_CHARS) return name;
  const hash = createHash("sha256").update(name, "utf8").digest("hex").slice(0, 6);
  return `${name.slice(0, MAX_NAME_CHARS - 7)}_${hash}`;
}

/** The name the client sees of a target's item. */
export function exposedName(mode: PrefixMode, targets: number, target: string, name: string): string {
  return prefixes(mode, targets) ? shorten(`${target}${PREFIX_SEPARATOR}${name}`) : name;
}

/** A prefixed name split at its first separator (no lookup: only for names that were not shortened). */
export function splitPrefixed(name: string): { target: string; name: string } | undefined {
  const i = name.indexOf(PREFIX_SEPARATOR);
  if (i <= 0) return undefined;
  return { target: name.slice(0, i), name: name.slice(i + 1) };
}

export function exposedUri(mode: PrefixMode, targets: number, target: string, uri: string): string {
  return routesUris(mode, targets) ? `${URI_PREFIX}${target}/${uri}` : uri;
}

/** The target and its own URI of a URI the client sends; undefined when it names no target. */
export function splitUri(uri: string): { target: string; uri: string } | undefined {
  if (!uri.startsWith(URI_PREFIX)) return undefined;
  const rest = uri.slice(URI_PREFIX.length);
  const i = rest.indexOf("/");
  if (i <= 0) return undefined;
  return { target: rest.slice(0, i), uri: rest.slice(i + 1) };
}
