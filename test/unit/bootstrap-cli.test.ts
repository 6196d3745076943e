// `sluice bootstrap`: delta xDS by default, `--sotw` for state of the world, `--delta` still accepted, and the two
// together refused.

import assert from "node:assert/strict";
import { test } from "node:test";
import { runBootstrap } from "../../src/cli/bootstrap.js";

async function run(args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = "";
  let err = "";
  const code = await runBootstrap(args, { stdout: (s) => (out += s), stderr: (s) => (err += s) });
  return { code, out, err };
}

const apiType = (yaml: string) => /api_type: (\w+)/.exec(yaml)?.[1];

test("bootstrap: delta xDS unless --sotw", async () => {
  assert.equal(apiType((await run(["--gateway", "ns/gw"])).out), "DELTA_GRPC");
  assert.equal(apiType((await run(["--gateway", "ns/gw", "--delta"])).out), "DELTA_GRPC");
  assert.equal(apiType((await run(["--gateway", "ns/gw", "--sotw"])).out), "GRPC");
});

test("bootstrap: --delta with --sotw is refused, naming both", async () => {
  const r = await run(["--gateway", "ns/gw", "--delta", "--sotw"]);
  assert.equal(r.code, 2);
  assert.equal(r.out, "");
  assert.match(r.err, /--delta and --sotw/);
});
