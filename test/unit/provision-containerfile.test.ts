// deploy/Containerfile checked without a container runtime (this machine cannot pull its base image: docs/kubernetes.md,
// "The image"): what it copies from the checkout exists, the entrypoint reaches the compiled CLI through the paths the
// image lays out, every package the compiled code imports survives `npm prune --omit=dev`, and the user and ports
// are the chart's.

import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { builtinModules } from "node:module";
import { dirname, join, posix } from "node:path";
import { test } from "node:test";
import { parse } from "yaml";
import { projectRoot } from "../../src/cli/paths.js";

const root = projectRoot();
const containerfile = readFileSync(join(root, "deploy", "Containerfile"), "utf8");

interface Instruction {
  readonly op: string;
  readonly args: string;
}
interface Stage {
  readonly name: string | undefined;
  readonly instructions: Instruction[];
}

/** The Containerfile's stages and their instructions (comments dropped, continuation lines joined). */
function stages(text: string): Stage[] {
  const out: Stage[] = [];
  const lines = text.replace(/\\\n/g, " ").split("\n");
  for (const line of lines.map((l) => l.trim())) {
    if (line === "" || line.startsWith("#")) continue;
    const [op = "", ...rest] = line.split(/\s+/);
    const args = rest.join(" ");
    if (op.toUpperCase() === "FROM") {
      const as = /\s+AS\s+(\S+)$/i.exec(args);
      out.push({ name: as?.[1], instructions: [] });
      continue;
    }
    const stage = out.at(-1);
    if (stage === undefined) continue; // ARG before the first FROM
    stage.instructions.push({ op: op.toUpperCase(), args });
  }
  return out;
}

/** COPY's flags, sources and destination. */
function copyOf(args: string): { from?: string; sources: string[]; dest: string } {
  const words = args.split(/\s+/);
  const flags = words.filter((w) => w.startsWith("--"));
  const paths = words.filter((w) => !w.startsWith("--"));
  const from = flags.find((f) => f.startsWith("--from="))?.slice("--from=".length);
  return { ...(from !== undefined ? { from } : {}), sources: paths.slice(0, -1), dest: paths.at(-1) ?? "" };
}

const all = stages(containerfile);
const build = all.find((s) => s.name === "build");
const image = all.at(-1);

test("Containerfile: a build stage and an image stage", () => {
  assert.ok(build !== undefined, "a stage named build");
  assert.ok(image !== undefined && image !== build, "a final stage of its own");
});

test("Containerfile: everything the build stage copies from the checkout exists, and tsc gets every folder tsconfig.json includes", () => {
  const copied: string[] = [];
  for (const i of build?.instructions ?? []) {
    if (i.op !== "COPY") continue;
    const c = copyOf(i.args);
    assert.equal(c.from, undefined, `the build stage copies from the checkout: ${i.args}`);
    for (const s of c.sources) {
      assert.ok(existsSync(join(root, s)), `COPY ${s}: not in the checkout`);
      copied.push(s.replace(/\/$/, ""));
    }
  }
  const tsconfig = JSON.parse(readFileSync(join(root, "tsconfig.json"), "utf8")) as {
    include: string[];
    compilerOptions: { outDir: string };
  };
  for (const glob of tsconfig.include) {
    const top = glob.split("/")[0] ?? "";
    assert.ok(copied.includes(top), `tsconfig.json includes ${glob}, but the build stage does not copy ${top}`);
  }
  assert.equal(tsconfig.compilerOptions.outDir, "dist", "the image copies dist/src: tsc's outDir must be dist");
});

test("Containerfile: the entrypoint is bin/sluice.js, whose import of the compiled CLI resolves inside the image", () => {
  assert.ok(image !== undefined);
  let workdir = "/";
  /** Where each path of the build stage lands in the image. */
  const layout = new Map<string, string>();
  for (const i of image.instructions) {
    if (i.op === "WORKDIR") workdir = posix.resolve(workdir, i.args);
    if (i.op !== "COPY") continue;
    const c = copyOf(i.args);
    assert.equal(c.from, "build", `the image copies from the build stage only: ${i.args}`);
    for (const s of c.sources)
      layout.set(posix.resolve(workdir, c.dest, c.sources.length > 1 ? posix.basename(s) : ""), s);
  }
  const entry = image.instructions.find((i) => i.op === "ENTRYPOINT");
  assert.ok(entry !== undefined, "an ENTRYPOINT");
  const argv = JSON.parse(entry.args) as string[];
  assert.equal(argv[0], "node");
  // Node's own flags (test/unit/node-flags.test.ts) come before the script.
  const script = argv.slice(1).find((a) => !a.startsWith("-")) ?? "";
  // The build stage's WORKDIR is /src: the checkout's bin/ is /src/bin there.
  const binDir = layout.get(posix.dirname(script));
  assert.equal(binDir, "/src/bin", `${posix.dirname(script)} holds the checkout's bin/`);
  assert.ok(existsSync(join(root, "bin", posix.basename(script))), `bin/${posix.basename(script)} exists`);
  // bin/sluice.js imports ../dist/src/cli/main.js: in the image that must be a copied dist/src.
  const launcher = readFileSync(join(root, "bin", posix.basename(script)), "utf8");
  const target = /new URL\("([^"]+)", import\.meta\.url\)/.exec(launcher)?.[1];
  assert.ok(target !== undefined, "bin/sluice.js names the compiled CLI");
  const inImage = posix.resolve(posix.dirname(script), target);
  const copiedDir = [...layout.keys()].find((k) => inImage.startsWith(`${k}/`));
  assert.ok(copiedDir !== undefined, `${inImage} is under a copied folder`);
  assert.equal(layout.get(copiedDir), "/src/dist/src", `${copiedDir} holds the compiled src/`);
  assert.ok(existsSync(join(root, "dist", "src", inImage.slice(copiedDir.length + 1))), `${target} is compiled`);
  // package.json ("type": "module") and the production node_modules are beside them.
  assert.equal(layout.get(posix.resolve(workdir, "package.json")), "/src/package.json");
  assert.equal(layout.get(posix.resolve(workdir, "node_modules")), "/src/node_modules");
  assert.equal(layout.get(posix.resolve(workdir, "deploy")), "/src/deploy", "deploy/ (bootstrap templates) is copied");
  // The web console reads its page, script and stylesheet from <project root>/src/console/static at run time.
  const consoleStatic = posix.resolve(workdir, "src/console/static");
  assert.equal(layout.get(consoleStatic), "/src/src/console/static", "the console's static files are copied");
  assert.ok(existsSync(join(root, "src", "console", "static", "index.html")), "src/console/static/index.html exists");
  assert.deepEqual(
    JSON.parse(image.instructions.find((i) => i.op === "CMD")?.args ?? "[]"),
    ["--help"],
    "a bare run prints the help",
  );
});

/** Imported at run time but a dev dependency, so missing from the image (with why it may be): none. */
const KNOWN_MISSING: Readonly<Record<string, string>> = {};

/** Package names imported (not type-only: the compiled code's) by the JavaScript files under `dir`. */
function importedPackages(dir: string, into = new Map<string, string>()): Map<string, string> {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, e.name);
    if (e.isDirectory()) importedPackages(path, into);
    else if (e.name.endsWith(".js")) {
      const text = readFileSync(path, "utf8");
      const specs = [
        // Static imports and re-exports (tsc leaves one per statement, at the start of a line), side-effect imports,
        // and dynamic imports of a literal.
        ...text.matchAll(/^(?:import|export)\s[^;]*?\sfrom\s*"([^"]+)"/gm),
        ...text.matchAll(/^import\s*"([^"]+)"/gm),
        ...text.matchAll(/\bimport\(\s*"([^"]+)"\s*\)/g),
      ];
      for (const m of specs) {
        const spec = m[1] ?? "";
        if (spec.startsWith(".") || spec.startsWith("node:") || builtinModules.includes(spec)) continue;
        const name = spec.startsWith("@") ? spec.split("/").slice(0, 2).join("/") : (spec.split("/")[0] ?? spec);
        into.set(name, path.slice(root.length + 1));
      }
    }
  }
  return into;
}

test("Containerfile: every package the compiled src/ imports is a production dependency (npm prune --omit=dev keeps it)", () => {
  assert.match(
    build?.instructions.map((i) => i.args).join("\n") ?? "",
    /npm prune --omit=dev/,
    "the build stage prunes the dev dependencies",
  );
  const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as {
    dependencies: Record<string, string>;
  };
  const used = importedPackages(join(root, "dist", "src"));
  assert.ok(used.size >= 5, `${used.size} packages found: is dist/src built?`);
  const missing = [...used].filter(([name]) => pkg.dependencies[name] === undefined).map(([name]) => name);
  assert.deepEqual(
    missing.sort(),
    Object.keys(KNOWN_MISSING).sort(),
    "imported by the compiled code but not in package.json dependencies (absent from the image after the prune)",
  );
  // The launcher itself imports Node's modules only.
  const launcher = readFileSync(join(root, "bin", "sluice.js"), "utf8");
  for (const m of launcher.matchAll(/from\s*"([^"]+)"/g)) assert.match(m[1] ?? "", /^node:/);
});

test("Containerfile: the user and ports are the chart's", () => {
  const user = image?.instructions.find((i) => i.op === "USER")?.args ?? "";
  const template = readFileSync(join(root, "deploy", "helm", "sluice", "templates", "deployment.yaml"), "utf8");
  const runAs = /runAsUser:\s*(\d+)/.exec(template)?.[1];
  assert.equal(user.split(":")[0], runAs, "USER is the chart's runAsUser");
  const values = parse(readFileSync(join(root, "deploy", "helm", "sluice", "values.yaml"), "utf8")) as {
    ports: Record<string, number>;
  };
  const exposed = (image?.instructions.find((i) => i.op === "EXPOSE")?.args ?? "").split(/\s+/).map(Number);
  assert.deepEqual(
    exposed.sort((a, b) => a - b),
    Object.values(values.ports).sort((a, b) => a - b),
  );
  assert.ok(existsSync(join(dirname(join(root, "deploy", "Containerfile")), "envoy", "bootstrap.yaml")));
});
