// What every prompt guard answers, whatever it runs on (a regex in this process, a webhook, a provider's moderation
// or guardrail service). The LLM ext_proc extracts the texts a guard reads from the body in the client's format, asks
// the guards of the direction in order, and writes masked texts back in place.

/** Which way the guarded text travels. */
export type GuardDirection = "request" | "response";

export interface GuardInput {
  readonly direction: GuardDirection;
  /** The texts of the message(s), in document order (each message's parts, system prompt, tool results...). */
  readonly texts: readonly string[];
  /** The client request's headers (lower-case names), for guards that forward some. */
  readonly headers: ReadonlyMap<string, string>;
}

export type GuardVerdict =
  | { readonly action: "pass" }
  /** `texts` has the input's length and order; an unchanged text is the same string. */
  | { readonly action: "mask"; readonly texts: readonly string[] }
  /** `reason` is for logs and the operator, never shown to the client (the CustomResponse is). */
  | { readonly action: "reject"; readonly reason: string };

/** A guard that asks a remote service. Fails by throwing (GuardError); the caller applies the failure mode. */
export interface RemoteGuard {
  check(input: GuardInput, signal: AbortSignal): Promise<GuardVerdict>;
}

/** A guard service that could not give a verdict (unreachable, timed out, refused our credentials, bad answer). */
export class GuardError extends Error {
  override readonly name = "GuardError";
}
