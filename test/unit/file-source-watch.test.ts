// The file source's watch (src/sources/file-source.ts): every save is seen, also one that replaces the file by a
// rename (an editor's atomic save, a temporary file renamed over the old one), again and again; a directory created
// later is watched too. Node's recursive watch on Linux lost a renamed file and everything after it.

import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { FileSource } from "../../src/sources/file-source.js";
import { sleep, waitFor } from "../helpers/net.js";

test("saves by rename, in place and in a new subdirectory each raise a change", async () => {
  const dir = mkdtempSync(join(tmpdir(), "sluice-watch-"));
  const source = new FileSource([dir]);
  let changes = 0;
  try {
    writeFileSync(join(dir, "routes.yaml"), "a: 0\n");
    await source.watch(() => {
      changes++;
    });
    const seen = async (what: string, write: () => void) => {
      const before = changes;
      write();
      await waitFor(what, async () => (changes > before ? true : undefined), 3000, 5);
      // Let the save's other events pass before the next one.
      await sleep(50);
    };
    for (let i = 1; i <= 3; i++) {
      await seen(`rename ${i}`, () => {
        writeFileSync(join(dir, ".routes.yaml.tmp"), `a: ${i}\n`);
        renameSync(join(dir, ".routes.yaml.tmp"), join(dir, "routes.yaml"));
      });
    }
    await seen("a write in place after the renames", () => writeFileSync(join(dir, "routes.yaml"), "a: 4\n"));
    await seen("a new subdirectory", () => mkdirSync(join(dir, "more")));
    await seen("a file in the new subdirectory", () => writeFileSync(join(dir, "more", "x.yaml"), "b: 1\n"));
    await seen("that file replaced by a rename", () => {
      writeFileSync(join(dir, "more", ".x.tmp"), "b: 2\n");
      renameSync(join(dir, "more", ".x.tmp"), join(dir, "more", "x.yaml"));
    });
    // Every one of the eight saves was seen (each waited for its own event above).
    assert.ok(changes >= 8, `${changes} change events`);
  } finally {
    source.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
