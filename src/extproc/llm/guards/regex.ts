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

  /** Spans to mask in `text`, sorted, not overlapping. */
  scan(text: string): Span[] {
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
   * match still being written (a run of characters a builtin match may contain, up to its longest match), or the
   * pattern window when the guard has user patterns (any text may start one of those).
   */
  holdBack(text: string): number {
    let hold = this.#patterns.length > 0 ? Math.min(text.length, PATTERN_STREAM_WINDOW) : 0;
    for (const d of this.#detectors) {
      let n = 0;
      const max = Math.min(text.length, d.maxLength);
      while (n < max && d.chars.test(text.charAt(text.length - 1 - n))) n++;
      if (n > hold) hold = n;
    }
    return hold;
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
