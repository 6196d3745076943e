// parseByteSize: the translators' whole-byte reading of a ByteSize, the validator's grammar rounded up.
import assert from "node:assert/strict";
import { test } from "node:test";
import { parseByteSize } from "../../src/translate/bytes.js";

test("parseByteSize reads the quantity grammar and rounds up to whole bytes", () => {
  const cases: [string | number, number | undefined][] = [
    ["1Gi", 2 ** 30],
    ["1.5Ki", 1536],
    ["1.5k", 1500],
    ["100m", 1],
    ["1e3", 1000],
    [".5", 1],
    [4096, 4096],
    [2.2, 3],
    [0, 0],
    [-1, undefined],
    ["-1", undefined],
    ["1 Mi", undefined],
    ["1MB", undefined],
    ["", undefined],
    [Number.POSITIVE_INFINITY, undefined],
  ];
  for (const [input, want] of cases) assert.equal(parseByteSize(input), want, JSON.stringify(input));
});
