// ByteSize values (Kubernetes quantity grammar, see src/api/common.ts) → a whole number of bytes.

const SUFFIX: Readonly<Record<string, number>> = {
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
  "": 1,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
};

/** Bytes, rounded up (a quantity like `1.5k` or `100m` is not whole); undefined when the text is not a quantity. */
export function parseByteSize(v: string | number): number | undefined {
  if (typeof v === "number") return Number.isFinite(v) && v >= 0 ? Math.ceil(v) : undefined;
  const m = /^((?:[0-9]+(?:\.[0-9]*)?)|(?:\.[0-9]+))(?:([KMGTPE]i|[numkMGTPE])|[eE]([+-]?[0-9.]+))?$/.exec(v);
  if (m === null) return undefined;
  const base = Number(m[1]);
  const factor = m[3] !== undefined ? 10 ** Number(m[3]) : (SUFFIX[m[2] ?? ""] ?? Number.NaN);
  const n = base * factor;
  return Number.isFinite(n) ? Math.ceil(n) : undefined;
}
