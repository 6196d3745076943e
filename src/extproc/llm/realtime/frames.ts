// RFC 6455 framing for the Realtime relay (relay.ts), both ends: frames from a client are masked and those to it are
// not; frames to the provider are masked (the relay is its client). Fragmented messages are put together (control
// frames may come between fragments); a message over MAX_MESSAGE_BYTES, an unmasked client frame, a reserved bit or
// opcode, or a fragmented or long control frame is a protocol error (the relay closes with 1002 / 1009).

import { createHash, randomBytes } from "node:crypto";

export const OP_CONTINUATION = 0x0;
export const OP_TEXT = 0x1;
export const OP_BINARY = 0x2;
export const OP_CLOSE = 0x8;
export const OP_PING = 0x9;
export const OP_PONG = 0xa;

/** Realtime events with audio are large (base64 PCM); 16 MiB is well above a 15 s audio append. */
export const MAX_MESSAGE_BYTES = 16 * 1024 * 1024;

const GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/** `Sec-WebSocket-Accept` for a `Sec-WebSocket-Key`. */
export function acceptKey(key: string): string {
  return createHash("sha1")
    .update(key + GUID)
    .digest("base64");
}

/** A new `Sec-WebSocket-Key`. */
export function newKey(): string {
  return randomBytes(16).toString("base64");
}

/** One frame (a whole message: FIN set), masked with a fresh key when `mask`. */
export function encodeFrame(opcode: number, payload: Buffer, mask: boolean): Buffer {
  const n = payload.length;
  const len = n < 126 ? 2 : n < 65536 ? 4 : 10;
  const head = Buffer.alloc(len + (mask ? 4 : 0));
  head[0] = 0x80 | opcode;
  const m = mask ? 0x80 : 0;
  if (n < 126) head[1] = m | n;
  else if (n < 65536) {
    head[1] = m | 126;
    head.writeUInt16BE(n, 2);
  } else {
    head[1] = m | 127;
    head.writeBigUInt64BE(BigInt(n), 2);
  }
  if (!mask) return Buffer.concat([head, payload]);
  const key = randomBytes(4);
  key.copy(head, len);
  const body = Buffer.allocUnsafe(n);
  for (let i = 0; i < n; i++) body[i] = (payload[i] as number) ^ (key[i & 3] as number);
  return Buffer.concat([head, body]);
}

export interface Message {
  readonly opcode: number;
  readonly payload: Buffer;
}

export class ProtocolError extends Error {
  constructor(
    readonly code: 1002 | 1009,
    message: string,
  ) {
    super(message);
  }
}

/** Reads the frames of one direction into messages (data messages whole, control frames as they come). */
export class FrameReader {
  #buf: Buffer = Buffer.alloc(0);
  #fragments: Buffer[] = [];
  #fragmentsBytes = 0;
  #fragmentOp = -1;

  /** `masked`: whether this direction's frames must be masked (from a client) or must not be (from a server). */
  constructor(readonly masked: boolean) {}

  /** The messages `chunk` completes; throws ProtocolError. */
  push(chunk: Buffer): Message[] {
    this.#buf = this.#buf.length === 0 ? chunk : Buffer.concat([this.#buf, chunk]);
    const out: Message[] = [];
    for (;;) {
      const buf = this.#buf;
      if (buf.length < 2) break;
      const b0 = buf[0] as number;
      const b1 = buf[1] as number;
      const fin = (b0 & 0x80) !== 0;
      const opcode = b0 & 0x0f;
      if ((b0 & 0x70) !== 0) throw new ProtocolError(1002, "reserved bits set");
      const isMasked = (b1 & 0x80) !== 0;
      if (isMasked !== this.masked) throw new ProtocolError(1002, this.masked ? "unmasked frame" : "masked frame");
      let len = b1 & 0x7f;
      let off = 2;
      if (len === 126) {
        if (buf.length < 4) break;
        len = buf.readUInt16BE(2);
        off = 4;
      } else if (len === 127) {
        if (buf.length < 10) break;
        const big = buf.readBigUInt64BE(2);
        if (big > BigInt(MAX_MESSAGE_BYTES)) throw new ProtocolError(1009, "frame too large");
        len = Number(big);
        off = 10;
      }
      const control = opcode >= 0x8;
      if (control && (!fin || len > 125)) throw new ProtocolError(1002, "bad control frame");
      if (![OP_CONTINUATION, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG].includes(opcode)) {
        throw new ProtocolError(1002, "reserved opcode");
      }
      if (len + this.#fragmentsBytes > MAX_MESSAGE_BYTES) throw new ProtocolError(1009, "message too large");
      const keyLen = isMasked ? 4 : 0;
      if (buf.length < off + keyLen + len) break;
      const payload = Buffer.from(buf.subarray(off + keyLen, off + keyLen + len));
      if (isMasked) {
        const key = buf.subarray(off, off + 4);
        for (let i = 0; i < len; i++) payload[i] = (payload[i] as number) ^ (key[i & 3] as number);
      }
      this.#buf = buf.subarray(off + keyLen + len);
      if (control) {
        out.push({ opcode, payload });
        continue;
      }
      if (opcode === OP_CONTINUATION) {
        if (this.#fragmentOp < 0) throw new ProtocolError(1002, "continuation without a message");
      } else {
        if (this.#fragmentOp >= 0) throw new ProtocolError(1002, "new message inside a fragmented one");
        this.#fragmentOp = opcode;
      }
      this.#fragments.push(payload);
      this.#fragmentsBytes += len;
      if (!fin) continue;
      out.push({ opcode: this.#fragmentOp, payload: Buffer.concat(this.#fragments) });
      this.#fragments = [];
      this.#fragmentsBytes = 0;
      this.#fragmentOp = -1;
    }
    return out;
  }
}
