// User regular expressions of prompt guards run in the LLM ext_proc on client text, so a pattern must not be able to
// backtrack catastrophically. V8's linear-time engine (the `l` flag) runs the RE2-like subset of JavaScript regexes
// (no lookaround, no backreferences, small counted repetitions) in time linear in the text; a pattern outside that
// subset is refused at translation with the engine's reason. The engine needs a V8 flag, set once here, and takes
// neither the `u` nor the `i` flag (patterns match UTF-16 code units, case-sensitively: write `[Ss]ecret`).

import { setFlagsFromString } from "node:v8";

let enabled = false;

function enable(): void {
  if (enabled) return;
  setFlagsFromString("--enable-experimental-regexp-engine");
  enabled = true;
}

/** The compiled pattern (global, linear-time), or the reason it cannot be used. */
export function linearRegex(pattern: string): { ok: RegExp } | { error: string } {
  enable();
  try {
    return { ok: new RegExp(pattern, "gl") };
  } catch (e) {
    const m = (e as Error).message.replace(/^Invalid regular expression: \/.*\/\w*: /s, "");
    return { error: m };
  }
}
