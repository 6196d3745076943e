// The AWS binary event-stream framing (application/vnd.amazon.eventstream) used by Bedrock ConverseStream:
//   total length (u32) | headers length (u32) | prelude CRC32 (u32) | headers | payload | message CRC32 (u32)
// Both CRCs are verified: a corrupted frame must not be translated into plausible-looking client events.
import { crc32 } from "node:zlib";

export type HeaderValue = string | number | boolean | bigint | Uint8Array | Date;

export interface EventStreamMessage {
  headers: Record<string, HeaderValue>;
  payload: Uint8Array;
}

export type DecodeResult = { messages: EventStreamMessage[]; error?: string };

const PRELUDE = 12;
const MIN_MESSAGE = 16;
/** AWS caps event-stream messages at 16 MiB; a larger length means a corrupt prelude, not a big event. */
const MAX_MESSAGE = 16 * 1024 * 1024;
const utf8d = new TextDecoder("utf-8");
const utf8e = new TextEncoder();

/** Incremental decoder: keeps only the bytes of the message being received. After an error it stays failed, since
 * framing cannot be re-synchronised. */
export class EventStreamDecoder {
  private chunks: Uint8Array[] = [];
  private size = 0;
  private failed: string | undefined;

  push(chunk: Uint8Array): DecodeResult {
    if (this.failed !== undefined) return { messages: [], error: this.failed };
    if (chunk.length > 0) {
      this.chunks.push(chunk);
      this.size += chunk.length;
    }
    const messages: EventStreamMessage[] = [];
    while (this.size >= PRELUDE) {
      const head = this.peek(PRELUDE);
      const dv = new DataView(head.buffer, head.byteOffset, head.byteLength);
      const total = dv.getUint32(0);
      const headersLen = dv.getUint32(4);
      if (crc32(head.subarray(0, 8)) !== dv.getUint32(8)) return this.fail(messages, "prelude CRC mismatch");
      if (total < MIN_MESSAGE || total > MAX_MESSAGE || headersLen > total - MIN_MESSAGE) {
        return this.fail(messages, `invalid message length ${total}`);
      }
      if (this.size < total) break;
      const frame = this.take(total);
      const fv = new DataView(frame.buffer, frame.byteOffset, frame.byteLength);
      if (crc32(frame.subarray(0, total - 4)) !== fv.getUint32(total - 4)) {
        return this.fail(messages, "message CRC mismatch");
      }
      const headers = decodeHeaders(frame.subarray(PRELUDE, PRELUDE + headersLen));
      if (headers === undefined) return this.fail(messages, "malformed headers");
      messages.push({ headers, payload: frame.subarray(PRELUDE + headersLen, total - 4) });
    }
    return { messages };
  }

  /** Bytes left over at the end of the stream are a truncated message. */
  end(): string | undefined {
    if (this.failed !== undefined) return this.failed;
    return this.size > 0 ? `truncated message (${this.size} bytes left)` : undefined;
  }

  private fail(messages: EventStreamMessage[], reason: string): DecodeResult {
    this.failed = reason;
    this.chunks = [];
    this.size = 0;
    return { messages, error: reason };
  }

  private peek(n: number): Uint8Array {
    const first = this.chunks[0]!;
    if (first.length >= n) return first.subarray(0, n);
    return concat(this.chunks, n);
  }

  private take(n: number): Uint8Array {
    const first = this.chunks[0]!;
    let out: Uint8Array;
    if (first.length >= n) {
      out = first.subarray(0, n);
    } else {
      out = concat(this.chunks, n);
    }
    // drop n bytes from the front of the chunk list
    let left = n;
    while (left > 0) {
      const c = this.chunks[0]!;
      if (c.length <= left) {
        left -= c.length;
        this.chunks.shift();
      } else {
        this.chunks[0] = c.subarray(left);
        left = 0;
      }
    }
    this.size -= n;
    return out;
  }
}

function concat(chunks: Uint8Array[], n: number): Uint8Array {
  const out = new Uint8Array(n);
  let off = 0;
  for (const c of chunks) {
    const k = Math.min(c.length, n - off);
    out.set(c.subarray(0, k), off);
    off += k;
    if (off === n) break;
  }
  return out;
}

function decodeHeaders(b: Uint8Array): Record<string, HeaderValue> | undefined {
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  // No prototype: a header named `__proto__` (found by fuzzing) is a header, not a change of this object's prototype.
  const out: Record<string, HeaderValue> = Object.create(null);
  let i = 0;
  while (i < b.length) {
    const nameLen = b[i]!;
    i += 1;
    if (i + nameLen + 1 > b.length) return undefined;
    const name = utf8d.decode(b.subarray(i, i + nameLen));
    i += nameLen;
    const type = b[i]!;
    i += 1;
    const need = (n: number): boolean => i + n <= b.length;
    switch (type) {
      case 0:
        out[name] = true;
        break;
      case 1:
        out[name] = false;
        break;
      case 2:
        if (!need(1)) return undefined;
        out[name] = dv.getInt8(i);
        i += 1;
        break;
      case 3:
        if (!need(2)) return undefined;
        out[name] = dv.getInt16(i);
        i += 2;
        break;
      case 4:
        if (!need(4)) return undefined;
        out[name] = dv.getInt32(i);
        i += 4;
        break;
      case 5:
        if (!need(8)) return undefined;
        out[name] = dv.getBigInt64(i);
        i += 8;
        break;
      case 6:
      case 7: {
        if (!need(2)) return undefined;
        const len = dv.getUint16(i);
        i += 2;
        if (!need(len)) return undefined;
        const v = b.subarray(i, i + len);
        out[name] = type === 7 ? utf8d.decode(v) : v;
        i += len;
        break;
      }
      case 8:
        if (!need(8)) return undefined;
        out[name] = new Date(Number(dv.getBigInt64(i)));
        i += 8;
        break;
      case 9:
        if (!need(16)) return undefined;
        out[name] = b.subarray(i, i + 16);
        i += 16;
        break;
      default:
        return undefined;
    }
  }
  return out;
}

function encodeHeaders(headers: Record<string, HeaderValue>): Uint8Array {
  const parts: Uint8Array[] = [];
  for (const [name, value] of Object.entries(headers)) {
    const n = utf8e.encode(name);
    let v: Uint8Array;
    if (typeof value === "string") {
      const s = utf8e.encode(value);
      v = new Uint8Array(3 + s.length);
      v[0] = 7;
      new DataView(v.buffer).setUint16(1, s.length);
      v.set(s, 3);
    } else if (typeof value === "boolean") {
      v = Uint8Array.of(value ? 0 : 1);
    } else if (typeof value === "number") {
      v = new Uint8Array(5);
      v[0] = 4;
      new DataView(v.buffer).setInt32(1, value);
    } else if (typeof value === "bigint") {
      v = new Uint8Array(9);
      v[0] = 5;
      new DataView(v.buffer).setBigInt64(1, value);
    } else if (value instanceof Date) {
      v = new Uint8Array(9);
      v[0] = 8;
      new DataView(v.buffer).setBigInt64(1, BigInt(value.getTime()));
    } else {
      v = new Uint8Array(3 + value.length);
      v[0] = 6;
      new DataView(v.buffer).setUint16(1, value.length);
      v.set(value, 3);
    }
    const h = new Uint8Array(1 + n.length + v.length);
    h[0] = n.length;
    h.set(n, 1);
    h.set(v, 1 + n.length);
    parts.push(h);
  }
  return concat(
    parts,
    parts.reduce((a, p) => a + p.length, 0),
  );
}

export function encodeEventStreamMessage(msg: EventStreamMessage): Uint8Array {
  const headers = encodeHeaders(msg.headers);
  const total = PRELUDE + headers.length + msg.payload.length + 4;
  const out = new Uint8Array(total);
  const dv = new DataView(out.buffer);
  dv.setUint32(0, total);
  dv.setUint32(4, headers.length);
  dv.setUint32(8, crc32(out.subarray(0, 8)));
  out.set(headers, PRELUDE);
  out.set(msg.payload, PRELUDE + headers.length);
  dv.setUint32(total - 4, crc32(out.subarray(0, total - 4)));
  return out;
}

/** A Bedrock-style event message: `:message-type: event`, `:event-type`, JSON payload. */
export function encodeJsonEvent(eventType: string, body: unknown): Uint8Array {
  return encodeEventStreamMessage({
    headers: { ":event-type": eventType, ":content-type": "application/json", ":message-type": "event" },
    payload: utf8e.encode(JSON.stringify(body)),
  });
}

/** A Bedrock-style exception message (`:message-type: exception`, `:exception-type`). */
export function encodeJsonException(exceptionType: string, message: string): Uint8Array {
  return encodeEventStreamMessage({
    headers: { ":exception-type": exceptionType, ":content-type": "application/json", ":message-type": "exception" },
    payload: utf8e.encode(JSON.stringify({ message })),
  });
}
