// HPACK (RFC 7541) for the hot-path HTTP/2 server: a full decoder (Envoy's encoder uses the dynamic table and
// Huffman coding) and the few fixed encodings the server's responses need (static-table references and literals
// never added to the dynamic table, so the encoder keeps no state).

import { HUFFMAN_CODES, HUFFMAN_LENGTHS, STATIC_TABLE } from "./hpack-tables.js";

export class HpackError extends Error {}

// Huffman decoding walks a binary tree built once from the code table: node i has children at tree[2i] (bit 0) and
// tree[2i + 1] (bit 1); a leaf holds -1 - symbol (symbol 256 is EOS).
const tree: number[] = [0, 0];
{
  const add = (code: number, length: number, symbol: number) => {
    let node = 0;
    for (let bit = length - 1; bit >= 0; bit--) {
      const slot = 2 * node + ((code >>> bit) & 1);
      if (bit === 0) {
        tree[slot] = -1 - symbol;
        return;
      }
      let next = tree[slot] ?? 0;
      if (next <= 0) {
        next = tree.length / 2;
        tree[slot] = next;
        tree.push(0, 0);
      }
      node = next;
    }
  };
  for (let s = 0; s < 256; s++) add(HUFFMAN_CODES[s] ?? 0, HUFFMAN_LENGTHS[s] ?? 0, s);
  add(0x3fffffff, 30, 256);
}

/**
 * Bytes as one character each (ISO-8859-1). Not TextDecoder("latin1"): the Encoding Standard makes that label
 * windows-1252, which turns 0x80-0x9f into other characters (0x82 into U+201A), so UTF-8 in a value was mangled.
 */
function latin1(b: Uint8Array, start: number, end: number): string {
  return (Buffer.isBuffer(b) ? b : Buffer.from(b.buffer, b.byteOffset, b.byteLength)).toString("latin1", start, end);
}

// Envoy's encoder sends some strings as Huffman-coded literals on every stream (`:path` is never indexed): short codes
// are decoded once and remembered by their bytes. Bounded: emptied when full.
const HUFFMAN_MEMO_MAX_BYTES = 64;
const HUFFMAN_MEMO_ENTRIES = 256;
const huffmanMemo = new Map<string, string>();

function huffmanDecode(b: Uint8Array, start: number, end: number): string {
  if (end - start > HUFFMAN_MEMO_MAX_BYTES) return huffmanDecodeBits(b, start, end);
  const key = latin1(b, start, end);
  const known = huffmanMemo.get(key);
  if (known !== undefined) return known;
  const s = huffmanDecodeBits(b, start, end);
  if (huffmanMemo.size >= HUFFMAN_MEMO_ENTRIES) huffmanMemo.clear();
  huffmanMemo.set(key, s);
  return s;
}

function huffmanDecodeBits(b: Uint8Array, start: number, end: number): string {
  const out: number[] = [];
  let node = 0;
  // Bits read since the last symbol: padding is at most 7 one-bits (RFC 7541 §5.2).
  let pending = 0;
  let allOnes = true;
  for (let i = start; i < end; i++) {
    const byte = b[i] ?? 0;
    for (let bit = 7; bit >= 0; bit--) {
      const one = (byte >>> bit) & 1;
      const next = tree[2 * node + one] ?? 0;
      pending++;
      allOnes &&= one === 1;
      if (next < 0) {
        const symbol = -1 - next;
        if (symbol === 256) throw new HpackError("EOS in a Huffman-coded string");
        out.push(symbol);
        node = 0;
        pending = 0;
        allOnes = true;
      } else if (next === 0) {
        throw new HpackError("invalid Huffman code");
      } else {
        node = next;
      }
    }
  }
  if (pending > 7 || !allOnes) throw new HpackError("invalid Huffman padding");
  return Buffer.from(out).toString("latin1");
}

export type Header = readonly [name: string, value: string];

/** One decoder per connection: the dynamic table lives as long as the connection. */
export class HpackDecoder {
  /** Newest first. */
  readonly #dynamic: Header[] = [];
  #size = 0;
  /** What this side advertised in SETTINGS_HEADER_TABLE_SIZE: the encoder may not go above it. */
  readonly #limit: number;
  #max: number;

  constructor(tableSize = 4096) {
    this.#limit = tableSize;
    this.#max = tableSize;
  }

  #evict(): void {
    while (this.#size > this.#max) {
      const e = this.#dynamic.pop();
      if (e === undefined) break;
      this.#size -= e[0].length + e[1].length + 32;
    }
  }

  #add(h: Header): void {
    this.#dynamic.unshift(h);
    this.#size += h[0].length + h[1].length + 32;
    this.#evict();
  }

  #entry(index: number): Header {
    if (index <= 0) throw new HpackError("header index 0");
    if (index < STATIC_TABLE.length) return STATIC_TABLE[index] as Header;
    const e = this.#dynamic[index - STATIC_TABLE.length];
    if (e === undefined) throw new HpackError(`header index ${index} beyond the tables`);
    return e;
  }

  /** Decodes one complete header block; the header list may not exceed `maxListSize` (RFC 7540 accounting). */
  decode(b: Uint8Array, maxListSize: number): Header[] {
    const headers: Header[] = [];
    let listSize = 0;
    let pos = 0;
    const integer = (prefixBits: number): number => {
      const mask = (1 << prefixBits) - 1;
      let v = (b[pos++] ?? 0) & mask;
      if (v < mask) return v;
      for (let shift = 0; ; shift += 7) {
        if (shift > 28) throw new HpackError("integer too large");
        const byte = b[pos++];
        if (byte === undefined) throw new HpackError("truncated integer");
        v += (byte & 0x7f) * 2 ** shift;
        if ((byte & 0x80) === 0) return v;
      }
    };
    const string = (): string => {
      if (pos >= b.byteLength) throw new HpackError("truncated string");
      const huffman = ((b[pos] ?? 0) & 0x80) !== 0;
      const n = integer(7);
      const end = pos + n;
      if (end > b.byteLength) throw new HpackError("truncated string");
      const s = huffman ? huffmanDecode(b, pos, end) : latin1(b, pos, end);
      pos = end;
      return s;
    };
    while (pos < b.byteLength) {
      const first = b[pos] ?? 0;
      let h: Header;
      if (first & 0x80) {
        h = this.#entry(integer(7));
      } else if ((first & 0xe0) === 0x20) {
        // Only at the start of a block (RFC 7541 §4.2): anywhere else it is a decoding error.
        if (headers.length > 0) throw new HpackError("dynamic table size update after a header field");
        const size = integer(5);
        if (size > this.#limit) throw new HpackError("dynamic table size above the advertised limit");
        this.#max = size;
        this.#evict();
        continue;
      } else {
        const indexing = (first & 0xc0) === 0x40;
        const index = integer(indexing ? 6 : 4);
        const name = index === 0 ? string() : this.#entry(index)[0];
        h = [name, string()];
        if (indexing) this.#add(h);
      }
      listSize += h[0].length + h[1].length + 32;
      if (listSize > maxListSize) throw new HpackError("header list too large");
      headers.push(h);
    }
    return headers;
  }
}

// ---- the server's fixed encodings ----

function literal(nameIndex: number, name: string, value: string): Buffer {
  // Literal header field without indexing (0000 + 4-bit name index; 0 = the name follows as a string), no Huffman.
  const v = Buffer.from(value, "latin1");
  const parts: number[] = [];
  if (nameIndex > 0 && nameIndex < 15) parts.push(nameIndex);
  else if (nameIndex >= 15) parts.push(0x0f, nameIndex - 15);
  else {
    const n = Buffer.from(name, "latin1");
    if (n.byteLength > 126) throw new Error("header name too long for this encoder");
    parts.push(0, n.byteLength, ...n);
  }
  const lengthBytes: number[] = [];
  let len = v.byteLength;
  if (len < 127) lengthBytes.push(len);
  else {
    lengthBytes.push(127);
    len -= 127;
    while (len >= 128) {
      lengthBytes.push((len & 0x7f) | 0x80);
      len = Math.floor(len / 128);
    }
    lengthBytes.push(len);
  }
  return Buffer.concat([Buffer.from(parts), Buffer.from(lengthBytes), v]);
}

/** `:status: 200` (static index 8) and `content-type: application/grpc` (name: static index 31). */
export const GRPC_RESPONSE_HEADERS: Buffer = Buffer.concat([
  Buffer.from([0x88]),
  literal(31, "content-type", "application/grpc"),
]);

/** The trailers of a call: `grpc-status` and, for a failure, `grpc-message` (percent-encoded, RFC 3986 unreserved kept). */
export function grpcTrailers(status: number, message?: string): Buffer {
  if (status === 0 && message === undefined) return GRPC_OK_TRAILERS;
  const parts = [literal(0, "grpc-status", String(status))];
  if (message !== undefined) parts.push(literal(0, "grpc-message", encodeURIComponent(message)));
  return Buffer.concat(parts);
}

const GRPC_OK_TRAILERS: Buffer = literal(0, "grpc-status", "0");

/** A trailers-only response (RFC: gRPC over HTTP/2, "Trailers-Only"): status, content type and the gRPC status. */
export function grpcTrailersOnly(status: number, message: string): Buffer {
  return Buffer.concat([GRPC_RESPONSE_HEADERS, grpcTrailers(status, message)]);
}
