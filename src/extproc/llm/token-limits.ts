// Local `tokens` rate limits (policy-api: counts are known after completion, so they affect later requests): a token
// bucket per limit that a request may enter while it holds a positive balance, debited by the tokens used.

import type { TokenLimit } from "../../translate/llm/table.js";

interface Bucket {
  balance: number;
  at: number;
  readonly limit: TokenLimit;
}

export class TokenLimiter {
  readonly #buckets = new Map<string, Bucket>();

  constructor(private readonly now: () => number = Date.now) {}

  #bucket(limit: TokenLimit): Bucket {
    let b = this.#buckets.get(limit.key);
    // A changed limit starts a fresh bucket.
    if (b === undefined || b.limit.tokens !== limit.tokens || b.limit.unitMs !== limit.unitMs) {
      b = { balance: limit.burst, at: this.now(), limit };
      this.#buckets.set(limit.key, b);
    }
    const t = this.now();
    b.balance = Math.min(limit.burst, b.balance + ((t - b.at) * limit.tokens) / limit.unitMs);
    b.at = t;
    return b;
  }

  /** Whether a new request may start under every limit. */
  admit(limits: readonly TokenLimit[]): boolean {
    return limits.every((l) => this.#bucket(l).balance > 0);
  }

  consume(limits: readonly TokenLimit[], tokens: number): void {
    for (const l of limits) this.#bucket(l).balance -= tokens;
  }
}
