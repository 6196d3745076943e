// Gateway API / spec durations (`1h30m`, `10s`, `500ms`) → protobuf Duration init. Returns undefined when invalid.

import type { MessageInitShape } from "@bufbuild/protobuf";
import type { DurationSchema } from "@bufbuild/protobuf/wkt";

const UNIT_MS: Readonly<Record<string, number>> = {
  h: 3_600_000,
  m: 60_000,
  s: 1000,
  ms: 1,
  us: 0.001,
  µs: 0.001,
  ns: 1e-6,
};
const PART = /(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|ns)/gy;

export function parseDurationMs(text: string): number | undefined {
  if (text === "" || text.length > 32) return undefined;
  if (text === "0") return 0;
  PART.lastIndex = 0;
  let total = 0;
  let consumed = 0;
  for (let m = PART.exec(text); m !== null; m = PART.exec(text)) {
    total += Number(m[1]) * (UNIT_MS[m[2] ?? ""] ?? Number.NaN);
    consumed = PART.lastIndex;
  }
  return consumed === text.length && Number.isFinite(total) ? total : undefined;
}

export function durationFromMs(ms: number): MessageInitShape<typeof DurationSchema> {
  const whole = Math.floor(ms / 1000);
  return { seconds: BigInt(whole), nanos: Math.round((ms - whole * 1000) * 1e6) };
}
