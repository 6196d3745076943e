// What an upstream transformation changed in one attempt's request headers, so that the next attempt can undo it.
// Envoy's upstream filters change the router's own request headers: a retry starts from the headers the previous
// attempt's transformation left (a header added twice, a value computed from an already transformed value).
//
// Two homes for the journal. An AI cluster's transformation keeps it with the LLM request the attempt belongs to
// (llm/service.ts). A Service backend's has no Sluice state per client request, so the journal travels with the
// request itself: sealed (AES-256-GCM under a key of this process) in the request's dynamic metadata, which Envoy's
// upstream filters share with the router and which only filters can write; the next attempt's stream receives it
// there. Nothing is kept in Sluice and it ends with the request; the seal keeps the header values (a client's
// Authorization a transformation replaced) from other filters and access logs, and a forged or foreign journal (another
// Sluice process) is not opened: nothing is undone then, as before.

import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import type { ReplyHeaders } from "./llm/wire.js";

/**
 * The request headers one client request's transformations changed, by name: the value before the change and the value
 * written (undefined: absent).
 */
export type AttemptJournal = Map<string, { readonly original?: string; readonly written?: string }>;

/** A client request's journal, and the headers its LLM stage set for this attempt (never restored). */
export interface AttemptState {
  readonly journal: AttemptJournal;
  readonly provided: ReadonlySet<string>;
  /**
   * Whether pseudo-headers and content-length are undone too: on a Service backend only the transformation writes them;
   * an AI cluster's LLM stage writes them anew for each attempt.
   */
  readonly pseudo?: boolean;
  /** `extauthz` as the attempt's provider's extAuth check left it (extproc/llm/provider-ext-auth.ts), when it told any. */
  readonly extauthz?: unknown;
}

/**
 * Undoes the previous attempt's changes in `view` (in place) and returns them as a mutation: a header still holding what
 * the transformation wrote gets its value from before (or is removed); one changed since (the LLM stage's own for this
 * attempt) is left as it is. The journal is emptied: this attempt's changes are recorded anew (recordAttempt).
 */
export function undoAttempt(
  view: Record<string, string>,
  a: AttemptState,
): { set: Record<string, string>; remove: string[] } {
  const set: Record<string, string> = {};
  const remove: string[] = [];
  for (const [name, j] of a.journal) {
    if (a.pseudo !== true && (name.startsWith(":") || name === "content-length")) continue;
    if (a.provided.has(name) || view[name] !== j.written) continue;
    if (j.original === undefined) {
      delete view[name];
      remove.push(name);
    } else {
      view[name] = j.original;
      set[name] = j.original;
    }
  }
  a.journal.clear();
  return { set, remove };
}

/** Records in `journal` the request header changes `h` makes to `view` (the headers as this attempt found them). */
export function recordAttempt(journal: AttemptJournal, view: Readonly<Record<string, string>>, h: ReplyHeaders): void {
  const written: Record<string, string | undefined> = {};
  for (const n of h.remove ?? []) written[n] = undefined;
  for (const [n, v] of Object.entries(h.set)) written[n] = v;
  for (const [n, v] of h.add ?? []) {
    const before = n in written ? written[n] : view[n];
    written[n] = before === undefined ? v : `${before},${v}`;
  }
  for (const [n, w] of Object.entries(written)) {
    journal.set(n, {
      ...(view[n] !== undefined ? { original: view[n] } : {}),
      ...(w !== undefined ? { written: w } : {}),
    });
  }
}

/**
 * `h` over the undoing of the previous attempt: what `h` sets or removes itself wins; what it adds is appended to the
 * value from before (Envoy applies a mutation's sets before its appends).
 */
export function withUndone(h: ReplyHeaders, undone: { set: Record<string, string>; remove: string[] }): ReplyHeaders {
  const changed = new Set([...Object.keys(h.set), ...(h.remove ?? [])]);
  const set = { ...Object.fromEntries(Object.entries(undone.set).filter(([n]) => !changed.has(n))), ...h.set };
  const remove = [...undone.remove.filter((n) => !changed.has(n)), ...(h.remove ?? [])];
  return { ...h, set, ...(remove.length > 0 ? { remove } : {}) };
}

/** Dynamic metadata namespace of a Service backend's sealed journal (forwarded to and received from the stream). */
export const ATTEMPT_METADATA_NAMESPACE = "sluice.transformation_attempt";
/** Its field: the sealed journal, base64url; empty when the attempt changed no request header. */
export const ATTEMPT_JOURNAL_FIELD = "journal";

// One key per process: a journal lives as long as its request, which never outlives the Envoy stream to this process.
const KEY = randomBytes(32);
const IV_BYTES = 12;
const TAG_BYTES = 16;
// Bound to its purpose, so no other sealed value of this key could be taken for a journal.
const AAD = Buffer.from(ATTEMPT_METADATA_NAMESPACE);

type Entry = [name: string, original: string | null, written: string | null];

/** The journal sealed for the request's metadata ("" when empty). */
export function sealJournal(journal: AttemptJournal): string {
  if (journal.size === 0) return "";
  const entries: Entry[] = [...journal].map(([n, j]) => [n, j.original ?? null, j.written ?? null]);
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv("aes-256-gcm", KEY, iv).setAAD(AAD);
  const sealed = Buffer.concat([cipher.update(JSON.stringify(entries)), cipher.final()]);
  return Buffer.concat([iv, cipher.getAuthTag(), sealed]).toString("base64url");
}

/** The journal of `text` (sealJournal's), or undefined when it was not sealed by this process or is malformed. */
export function openJournal(text: string): AttemptJournal | undefined {
  if (text === "") return new Map();
  const raw = Buffer.from(text, "base64url");
  if (raw.length < IV_BYTES + TAG_BYTES) return undefined;
  try {
    const decipher = createDecipheriv("aes-256-gcm", KEY, raw.subarray(0, IV_BYTES)).setAAD(AAD);
    decipher.setAuthTag(raw.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
    const plain = Buffer.concat([decipher.update(raw.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]);
    const entries = JSON.parse(plain.toString()) as Entry[];
    return new Map(
      entries.map(([n, original, written]) => [
        n,
        { ...(original !== null ? { original } : {}), ...(written !== null ? { written } : {}) },
      ]),
    );
  } catch {
    return undefined;
  }
}
