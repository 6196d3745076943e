// `sluice <command> --help` for every command, said by the real CLI (bin/sluice.js as a process, and main() for the
// many cases); unknown flags, commands and routes answered with the fix; help that names only flags the parsers take.

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { COMMAND_HELP, undocumentedOptions } from "../../src/cli/help.js";
import { main } from "../../src/cli/main.js";
import { projectRoot } from "../../src/cli/paths.js";

async function sluice(args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = "";
  let err = "";
  const code = await main(args, { stdout: (s) => (out += s), stderr: (s) => (err += s) });
  return { code, out, err };
}

const COMMANDS = [
  "run",
  "controller",
  "serve",
  "bootstrap",
  "certificate",
  "translate",
  "validate",
  "explain",
  "status",
  "ratelimit-config",
];

test("every command is documented, and only those", () => {
  assert.deepEqual(Object.keys(COMMAND_HELP).sort(), [...COMMANDS].sort());
});

test("sluice run --help, as a process: usage, every option, an example; exit 0, nothing on stderr", () => {
  const r = spawnSync(process.execPath, [join(projectRoot(), "bin", "sluice.js"), "run", "--help"], {
    encoding: "utf8",
    timeout: 30_000,
  });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stderr, "");
  assert.match(r.stdout, /^usage: sluice run -f <file\|dir>/);
  for (const flag of ["--file", "--admin-port", "--envoy-log-level", "--sotw", "--xds-ca", "--help"])
    assert.ok(r.stdout.includes(flag), `${flag} missing from:\n${r.stdout}`);
  assert.match(r.stdout, /examples:\n {2}sluice run -f examples\//);
});

for (const command of COMMANDS) {
  test(`sluice ${command} --help and -h and \`sluice help ${command}\` say the same, with a sentence per option`, async () => {
    const long = await sluice([command, "--help"]);
    const short = await sluice([command, "-h"]);
    const topic = await sluice(["help", command]);
    assert.equal(long.code, 0, long.err);
    assert.equal(long.err, "");
    assert.equal(short.out, long.out);
    assert.equal(topic.out, long.out);
    assert.match(long.out, new RegExp(`^usage: sluice ${command}\\b`));
    assert.match(long.out, /\noptions:\n/);
    assert.match(long.out, /\nexamples:\n {2}sluice /);
    assert.deepEqual(undocumentedOptions(command), [], `options of ${command} without a sentence`);
    for (const name of Object.keys(COMMAND_HELP[command]?.options ?? {}))
      assert.ok(long.out.includes(`--${name}`), `--${name} missing from sluice ${command} --help`);
  });
}

// The options of bootstrap, certificate, translate, validate, explain and status are written out in help.ts (their
// parsers list them inline): each is given to the real command, which must not call it unknown.
for (const command of ["bootstrap", "certificate", "translate", "validate", "explain", "status"]) {
  test(`every option sluice ${command} --help lists is one its parser takes`, async () => {
    for (const [name, spec] of Object.entries(COMMAND_HELP[command]?.options ?? {})) {
      // A value that makes each command stop early (a usage error or a missing file), never reach a cluster.
      const args = spec.type === "string" ? [`--${name}`, "/nonexistent/sluice-help-test"] : [`--${name}`];
      if (name === "kubeconfig" || name === "admin") continue; // would dial out; named in usage lines checked above
      const r = await sluice([command, ...args]);
      assert.doesNotMatch(r.err, /unknown option/i, `sluice ${command} ${args.join(" ")}: ${r.err}`);
    }
  });
}

test("`sluice` alone prints the commands with a pointer to --help (exit 2); --help exits 0", async () => {
  const bare = await sluice([]);
  assert.equal(bare.code, 2);
  for (const c of COMMANDS) assert.match(bare.out, new RegExp(`\\n {2}${c} +\\S`));
  assert.match(bare.out, /sluice <command> --help/);
  assert.equal((await sluice(["--help"])).code, 0);
});

test("a misspelt flag is answered with the nearest real one and where help is", async () => {
  const r = await sluice(["run", "--admin-prot", "0"]);
  assert.equal(r.code, 2);
  assert.match(r.err, /^sluice run: unknown option --admin-prot; did you mean --admin-port\? run `sluice run --help`/);
  const far = await sluice(["translate", "--zzzzzzzz"]);
  assert.equal(far.code, 2);
  assert.doesNotMatch(far.err, /did you mean/);
  assert.match(far.err, /sluice translate --help/);
});

test("a misspelt command is answered with the nearest; a missing value and a stray argument say the fix", async () => {
  const r = await sluice(["explian", "-f", "x"]);
  assert.equal(r.code, 2);
  assert.match(r.err, /unknown command "explian"; did you mean `sluice explain`\?/);
  const missing = await sluice(["translate", "-f"]);
  assert.equal(missing.code, 2);
  assert.match(missing.err, /argument missing; run `sluice translate --help`/);
  const stray = await sluice(["translate", "gateway.yaml"]);
  assert.equal(stray.code, 2);
  assert.match(stray.err, /unexpected argument gateway\.yaml: files are given with -f <file\|dir>/);
  const required = await sluice(["translate"]);
  assert.equal(required.code, 2);
  assert.match(required.err, /-f <file\|dir> is required\nrun `sluice translate --help`/);
});

test("--help after -- is an argument, not a request for help", async () => {
  const r = await sluice(["translate", "--", "--help"]);
  assert.notEqual(r.code, 0);
  assert.doesNotMatch(r.out, /^usage:/);
});

const dir = mkdtempSync(join(tmpdir(), "sluice-help-"));
after(() => rmSync(dir, { recursive: true, force: true }));

test("sluice explain with a route it does not know lists the routes it does, the likeliest first", async () => {
  const route = (ns: string, name: string) => `---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: ${name}, namespace: ${ns} }
spec:
  parentRefs: [{ name: gw }]
  rules: [{ backendRefs: [{ name: svc, port: 80 }] }]
`;
  writeFileSync(
    join(dir, "routes.yaml"),
    route("default", "orders") + route("shop", "checkout") + route("default", "api"),
  );
  const r = await sluice(["explain", "-f", dir, "--route", "default/order"]);
  assert.equal(r.code, 1);
  assert.match(r.err, /HTTPRoute default\/order not found/);
  assert.match(
    r.err,
    /Did you mean default\/orders\? HTTPRoutes there:\n {2}default\/api\n {2}default\/orders\n {2}shop\/checkout\n/,
  );
  assert.ok(r.err.includes(`try: sluice explain -f ${dir} --route default/orders`), r.err);
  const bad = await sluice(["explain", "-f", dir, "--route", "a/b/c/d"]);
  assert.equal(bad.code, 2);
  assert.match(bad.err, /--route "a\/b\/c\/d" is not <namespace>\/<name>\[\/<rule>\] \(for example default\/api/);
});
