// The regex guard's builtin detectors. Each is a JavaScript regex written so that it cannot backtrack badly (bounded
// repetitions, no nested quantifiers over the same characters) plus, where the number has one, a checksum: a card
// number or a Canadian SIN that fails the Luhn check is not one, so it is not masked. A quick test on the characters a
// match needs (a digit, an `@`) skips most texts without running the regex.

import type { GuardBuiltin } from "../../../translate/llm/guards.js";

export interface Detector {
  readonly re: RegExp;
  /** What a match is replaced by when masked. */
  readonly mask: string;
  /** A text without this character cannot match. */
  readonly needs: RegExp;
  /** Extra check of a match (checksum). */
  readonly valid?: (match: string) => boolean;
  /** The longest text a match can span, in characters (the streaming hold-back, stream.ts). */
  readonly maxLength: number;
  /** Characters a match may contain: a text ending in a run of them may be the start of a match. */
  readonly chars: RegExp;
  /** Characters a match may begin with: a run of `chars` is held back from its first one of these (stream.ts). */
  readonly starts: RegExp;
}

/** Luhn checksum over the digits of `s` (separators ignored). */
export function luhn(s: string): boolean {
  let sum = 0;
  let double = false;
  for (let i = s.length - 1; i >= 0; i--) {
    const c = s.charCodeAt(i) - 48;
    if (c < 0 || c > 9) continue;
    let d = c;
    if (double) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
    double = !double;
  }
  return sum % 10 === 0;
}

const digitCount = (s: string): number => s.replace(/\D/g, "").length;

export const DETECTORS: Readonly<Record<GuardBuiltin, Detector>> = {
  // 13 to 19 digits, grouped by spaces or dashes (one separator at a time), with a valid Luhn checksum.
  CreditCard: {
    re: /(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d])/g,
    mask: "<CREDIT_CARD>",
    needs: /\d/,
    valid: (m) => {
      const n = digitCount(m);
      return n >= 13 && n <= 19 && luhn(m);
    },
    maxLength: 37,
    chars: /[\d -]/,
    starts: /\d/,
  },
  // US SSN: AAA-GG-SSSS (dashes, spaces or none, the same throughout), not area 000, 666 or 9xx, nor group 00 or
  // serial 0000.
  Ssn: {
    re: /(?<![\d-])(?!000|666|9\d\d)\d{3}([- ]?)(?!00)\d{2}\1(?!0000)\d{4}(?![\d-])/g,
    mask: "<SSN>",
    needs: /\d/,
    maxLength: 11,
    chars: /[\d -]/,
    starts: /\d/,
  },
  // Canadian SIN: 9 digits (AAA-BBB-CCC, spaces, dashes or none) with a valid Luhn checksum.
  CaSin: {
    re: /(?<![\d-])\d{3}([- ]?)\d{3}\1\d{3}(?![\d-])/g,
    mask: "<CA_SIN>",
    needs: /\d/,
    valid: luhn,
    maxLength: 11,
    chars: /[\d -]/,
    starts: /\d/,
  },
  // North American numbers ((555) 123-4567, 555.123.4567, +1 555 123 4567) and international ones written with a
  // leading + and a country code (+44 20 7946 0958).
  PhoneNumber: {
    re: /(?<![\w+])(?:\+?1[ .-]?)?(?:\(\d{3}\)|\d{3})[ .-]?\d{3}[ .-]?\d{4}(?!\d)|(?<![\w+])\+(?:[2-9]\d{0,2})(?:[ .-]?\d{1,4}){2,5}(?!\d)/g,
    mask: "<PHONE_NUMBER>",
    needs: /\d/,
    valid: (m) => {
      const n = digitCount(m);
      return n >= 10 && n <= 15;
    },
    maxLength: 24,
    chars: /[\d +().-]/,
    starts: /[\d+(]/,
  },
  Email: {
    re: /(?<![\w.%+-])[\w.%+-]{1,64}@(?:[A-Za-z0-9-]{1,63}\.){1,8}[A-Za-z]{2,63}(?![\w-])/g,
    mask: "<EMAIL>",
    needs: /@/,
    maxLength: 254,
    chars: /[\w.%+@-]/,
    // The local part: any word may still be one, so a text ending in a word holds that word back.
    starts: /[\w.%+-]/,
  },
};

/** Builtins that detect the same numbers are tried in this order; the first to claim a span wins. */
export const BUILTIN_ORDER: readonly GuardBuiltin[] = ["CreditCard", "Ssn", "CaSin", "PhoneNumber", "Email"];
