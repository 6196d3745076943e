// The regex guard: builtin detectors (builtins.ts) and the user's patterns (linear-time engine, translate/llm/
// linear-regex.ts) find spans of a text; overlapping spans are resolved by taking the one found first in detector
// order (builtins, then patterns in their order), so a card number is masked as a card, not as a phone number. A
// masked span is replaced by its mask (`<CREDIT_CARD>`, `<SSN>`, `<CA_SIN>`, `<PHONE_NUMBER>`, `<EMAIL>`, and
// `<MASKED>` for a user pattern): the text stays a string, so the body stays valid in its format.

import type { GuardBuiltin, RegexGuardSpec } from "../../../translate/llm/guards.js";
import { linearRegex } from "../../../translate/llm/linear-regex.js";
import { BUILTIN_ORDER, DETECTORS, type Detector } from "./builtins.js";

export const PATTERN_MASK = "<MASKED>";
/** How much text a user pattern may span across stream chunks and still be caught (stream.ts). */
export const PATTERN_STREAM_WINDOW = 128;

export interface Span {
  readonly start: number;
  readonly end: number;
  readonly mask: string;
}

export class RegexScanner {
  readonly #detectors: readonly Detector[];
  readonly #patterns: readonly RegExp[];

  constructor(patterns: readonly string[], builtins: readonly GuardBuiltin[]) {
    this.#detectors = BUILTIN_ORDER.filter((b) => builtins.includes(b)).map((b) => DETECTORS[b]);
    const compiled: RegExp[] = [];
    for (const p of patterns) {
      const c = linearRegex(p);
      // The translator left out patterns that do not compile and said so in the status.
      if ("ok" in c) compiled.push(c.ok);
    }
    this.#patterns = compiled;
  }

  /**
   * Spans to mask in `text`, sorted, not overlapping. `seen` collects every match found, also those a checksum turned
   * down or an earlier detector's span overlapped: a stream does not cut through one of those, as more text may make
   * it the one that is masked.
   */
  scan(text: string, seen?: { start: number; end: number }[]): Span[] {
    let spans: Span[] | undefined;
    const add = (start: number, end: number, mask: string) => {
      if (end <= start) return;
      spans ??= [];
      for (const s of spans) if (start < s.end && s.start < end) return;
      spans.push({ start, end, mask });
    };
    for (const d of this.#detectors) {
      if (!d.needs.test(text)) continue;
      d.re.lastIndex = 0;
      for (let m = d.re.exec(text); m !== null; m = d.re.exec(text)) {
        seen?.push({ start: m.index, end: m.index + m[0].length });
        if (d.valid === undefined || d.valid(m[0])) add(m.index, m.index + m[0].length, d.mask);
      }
    }
    for (const re of this.#patterns) {
      re.lastIndex = 0;
      for (let m = re.exec(text); m !== null; m = re.exec(text)) {
        if (m[0].length === 0) {
          re.lastIndex++;
          continue;
        }
        seen?.push({ start: m.index, end: m.index + m[0].length });
        add(m.index, m.index + m[0].length, PATTERN_MASK);
      }
    }
    if (spans === undefined) return [];
    return (spans as Span[]).sort((a, b) => a.start - b.start);
  }

  /** `text` with `spans` (from scan) replaced by their masks. */
  static apply(text: string, spans: readonly Span[]): string {
    let out = "";
    let at = 0;
    for (const s of spans) {
      out += text.slice(at, s.start) + s.mask;
      at = s.end;
    }
    return out + text.slice(at);
  }

  /**
   * How many characters at the end of `text` a stream must hold back: the longest tail that may be the beginning of a
   * match still being written, or the pattern window when the guard has user patterns (any text may start one of
   * those). A builtin match lies in a run of the characters it may contain, is shorter than its longest match, and
   * begins with one of its start characters: the tail is held from the first start character of the trailing run
   * within that length ("call 555 " holds "555 ", "Hello " holds nothing, "Hello" holds "Hello" for Email).
   */
  holdBack(text: string): number {
    let hold = this.#patterns.length > 0 ? Math.min(text.length, PATTERN_STREAM_WINDOW) : 0;
    for (const d of this.#detectors) {
      const max = Math.min(text.length, d.maxLength);
      for (let n = 0; n < max; n++) {
        const c = text.charAt(text.length - 1 - n);
        if (!d.chars.test(c)) break;
        if (n >= hold && d.starts.test(c)) hold = n + 1;
      }
    }
    return hold;
  }
  /**
   * How many of the characters a stream released last (`tail`, the text before what it holds) a scan of the held text
   * must start with to find what a scan of the whole text finds there: the run of characters a builtin match may
   * contain that reaches the end of `tail`, when a match may start in it (a match attempt in progress), and the
   * character before it (lookbehinds); all of `tail` when the guard has user patterns.
   */
  context(tail: string): number {
    if (tail === "") return 0;
    if (this.#patterns.length > 0) return tail.length;
    let need = 1;
    for (const d of this.#detectors) {
      let n = 0;
      let start = false;
      while (n < tail.length && d.chars.test(tail.charAt(tail.length - 1 - n))) {
        if (!start && d.starts.test(tail.charAt(tail.length - 1 - n))) start = true;
        n++;
      }
      if (start && n + 1 > need) need = Math.min(tail.length, n + 1);
    }
    return need;
  }
}

const cache = new Map<string, RegexScanner>();

/** One scanner per guard (by its patterns and builtins), built on first use. */
export function scannerFor(spec: Pick<RegexGuardSpec, "patterns" | "builtins">): RegexScanner {
  const key = JSON.stringify([spec.patterns, spec.builtins]);
  let s = cache.get(key);
  if (s === undefined) {
    if (cache.size > 1024) cache.clear();
    s = new RegexScanner(spec.patterns, spec.builtins);
    cache.set(key, s);
  }
  return s;
}
