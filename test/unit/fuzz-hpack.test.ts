// Fuzzing the HPACK decoder (src/grpc/hpack.ts): any bytes either decode or fail with HpackError (never another
// exception, never slowly), and header lists encoded by an independent encoder (this file: literals with and without
// indexing, dynamic-table references, Huffman strings from the RFC's code table, table size updates) decode to
// themselves, block after block on one connection's table.

import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { HpackDecoder, HpackError } from "../../src/grpc/hpack.js";
import { HUFFMAN_CODES, HUFFMAN_LENGTHS, STATIC_TABLE } from "../../src/grpc/hpack-tables.js";
import { holds, within } from "./fuzz-support.js";

function int(value: number, prefixBits: number, first: number): number[] {
  const max = (1 << prefixBits) - 1;
  if (value < max) return [first | value];
  const out = [first | max];
  let v = value - max;
  while (v >= 128) {
    out.push((v & 0x7f) | 0x80);
    v = Math.floor(v / 128);
  }
  out.push(v);
  return out;
}

function huffman(s: string): number[] {
  const out: number[] = [];
  let acc = 0n;
  let bits = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    acc = (acc << BigInt(HUFFMAN_LENGTHS[c] ?? 0)) | BigInt(HUFFMAN_CODES[c] ?? 0);
    bits += HUFFMAN_LENGTHS[c] ?? 0;
    while (bits >= 8) {
      out.push(Number((acc >> BigInt(bits - 8)) & 0xffn));
      bits -= 8;
    }
    acc &= (1n << BigInt(bits)) - 1n;
  }
  if (bits > 0) out.push(Number(((acc << BigInt(8 - bits)) | ((1n << BigInt(8 - bits)) - 1n)) & 0xffn));
  return out;
}

function str(s: string, useHuffman: boolean): number[] {
  if (!useHuffman) return [...int(s.length, 7, 0), ...Buffer.from(s, "latin1")];
  const h = huffman(s);
  return [...int(h.length, 7, 0x80), ...h];
}

type Header = [string, string];

/** A reference encoder keeping its own copy of the dynamic table (newest first), as the decoder must. */
class Encoder {
  table: Header[] = [];
  size = 0;
  max = 4096;

  evict(): void {
    while (this.size > this.max) {
      const e = this.table.pop() as Header;
      this.size -= e[0].length + e[1].length + 32;
    }
  }

  encode(list: readonly Header[], choices: readonly number[], resize: number | undefined): Buffer {
    const out: number[] = [];
    if (resize !== undefined) {
      out.push(...int(resize, 5, 0x20));
      this.max = resize;
      this.evict();
    }
    list.forEach(([name, value], i) => {
      const choice = choices[i % choices.length] ?? 0;
      const dyn = this.table.findIndex(([n, v]) => n === name && v === value);
      const stat = STATIC_TABLE.findIndex((e, j) => j > 0 && e?.[0] === name && e?.[1] === value);
      if (choice % 4 === 0 && dyn >= 0) out.push(...int(STATIC_TABLE.length + dyn, 7, 0x80));
      else if (choice % 4 === 1 && stat > 0) out.push(...int(stat, 7, 0x80));
      else {
        const indexing = choice % 3 === 0;
        const nameIdx = STATIC_TABLE.findIndex((e, j) => j > 0 && e?.[0] === name);
        out.push(...int(nameIdx > 0 && choice % 2 === 0 ? nameIdx : 0, indexing ? 6 : 4, indexing ? 0x40 : 0));
        if (!(nameIdx > 0 && choice % 2 === 0)) out.push(...str(name, choice % 5 < 2));
        out.push(...str(value, choice % 7 < 3));
        if (indexing) {
          this.table.unshift([name, value]);
          this.size += name.length + value.length + 32;
          this.evict();
        }
      }
    });
    return Buffer.from(out);
  }
}

const latin1 = fc.string({ unit: fc.integer({ min: 0, max: 255 }).map((c) => String.fromCharCode(c)), maxLength: 40 });
const name = fc.oneof(
  fc.constantFrom(":path", ":method", "content-type", "x-a", "grpc-timeout", "user-agent"),
  latin1.filter((s) => s.length > 0),
);
const headerList = fc.array(fc.tuple(name, latin1) as fc.Arbitrary<Header>, { maxLength: 20 });

test("HPACK: lists encoded with indexing, references, Huffman and size updates decode to themselves", () =>
  holds(
    "hpack round trip",
    fc.property(
      fc.array(
        fc.record({
          list: headerList,
          choices: fc.array(fc.nat(), { minLength: 1, maxLength: 8 }),
          resize: fc.option(fc.integer({ min: 0, max: 4096 }), { nil: undefined }),
        }),
        { minLength: 1, maxLength: 6 },
      ),
      (blocks) => {
        const enc = new Encoder();
        const dec = new HpackDecoder(4096);
        for (const b of blocks) {
          const bytes = enc.encode(b.list, b.choices, b.resize);
          assert.deepEqual(
            dec.decode(bytes, 1 << 20).map((h) => [...h]),
            b.list,
          );
        }
      },
    ),
  ));

test("HPACK: any bytes decode or fail with HpackError, quickly, and the decoder goes on", () =>
  holds(
    "hpack arbitrary bytes",
    fc.property(fc.array(fc.uint8Array({ maxLength: 300 }), { minLength: 1, maxLength: 5 }), (blocks) => {
      const dec = new HpackDecoder(4096);
      for (const b of blocks) {
        within(500, "decode", () => {
          try {
            dec.decode(b, 64 * 1024);
          } catch (e) {
            if (!(e instanceof HpackError)) throw e;
          }
        });
      }
    }),
  ));

test("HPACK: the header list limit holds however the list is compressed (table references to a large entry)", () =>
  holds(
    "hpack list limit",
    fc.property(fc.integer({ min: 1, max: 4000 }), fc.integer({ min: 1, max: 200 }), (size, refs) => {
      const dec = new HpackDecoder(4096);
      const block = Buffer.from([
        ...int(0, 6, 0x40),
        ...str("x", false),
        ...str("v".repeat(size), false),
        ...Array.from({ length: refs }, () => 0x80 | STATIC_TABLE.length),
      ]);
      const total = (1 + refs) * (1 + size + 32);
      try {
        const list = dec.decode(block, 16 * 1024);
        assert.ok(total <= 16 * 1024, `a list of ${total} bytes passed a 16 KiB limit`);
        assert.equal(list.length, 1 + refs);
      } catch (e) {
        assert.ok(e instanceof HpackError);
        assert.ok(total > 16 * 1024, `a list of ${total} bytes was refused under a 16 KiB limit`);
      }
    }),
  ));

// Found by the round trip above: values were decoded with TextDecoder("latin1"), which the Encoding Standard maps to
// windows-1252, so 0x82 came out as U+201A and UTF-8 in gRPC metadata was mangled.
test("HPACK: bytes 0x80-0x9f in a literal or Huffman-coded value decode one character per byte", () => {
  const raw = "\x82\x80\x9f\xe2\x82\xac";
  const block = Buffer.from([
    0x00,
    ...str("x-a", false),
    ...str(raw, false),
    0x00,
    ...str("x-b", false),
    ...str(raw, true),
  ]);
  assert.deepEqual(
    new HpackDecoder().decode(block, 1 << 16).map((h) => [...h]),
    [
      ["x-a", raw],
      ["x-b", raw],
    ],
  );
});
