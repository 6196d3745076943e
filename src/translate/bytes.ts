// ByteSize values (Kubernetes quantity grammar, read by src/api/common.ts's byteQuantity) → a whole number of bytes.
import { byteQuantity } from "../api/common.js";

/** Bytes, rounded up (a quantity like `1.5k` or `100m` is not whole); undefined when the text is not a quantity. */
export function parseByteSize(v: string | number): number | undefined {
  const n = byteQuantity(v);
  return n !== undefined && n >= 0 ? Math.ceil(n) : undefined;
}
