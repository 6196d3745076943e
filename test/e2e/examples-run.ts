// Runs a directory of examples/ the way its README says: `sluice run -f examples/<name>` (ports moved to free ones),
// then every `curl` line of the README's ```sh blocks, as written, through the real Envoy that `sluice run` started,
// checked against the line's `# expect <status> ["text"]`. A `# then: <step>` line is a step the test does for the
// reader (stop a provider, wait for a budget); an unknown step fails the test. So a README that drifts from what
// Sluice does fails here.

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { cpSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { projectRoot } from "../../src/cli/paths.js";
import { waitFor } from "../helpers/net.js";
import { type SluiceProcess, startSluice, tempConfigDir } from "../helpers/processes.js";

export function exampleDir(name: string): string {
  return join(projectRoot(), "examples", name);
}

/** Replaces each fixed port of the example (8080, 8081, ...) with the one the test picked. */
export function withPorts(text: string, ports: ReadonlyMap<number, number>): string {
  let out = text;
  for (const [from, to] of ports) out = out.replace(new RegExp(`\\b${from}\\b`, "g"), String(to));
  return out;
}

export interface ReadmeCall {
  readonly line: string;
  /** Shell lines before it in its block (variables the call uses). */
  readonly prelude: readonly string[];
  readonly status: number;
  readonly contains?: string;
}

export type ReadmeStep = ReadmeCall | { readonly step: string };

/** The calls and steps of the README's ```sh blocks, in order. */
export function readmeSteps(name: string): ReadmeStep[] {
  const text = readFileSync(join(exampleDir(name), "README.md"), "utf8");
  const out: ReadmeStep[] = [];
  for (const block of text.matchAll(/```sh\n([\s\S]*?)```/g)) {
    const lines = (block[1] ?? "").replace(/\\\n\s*/g, " ").split("\n");
    const prelude: string[] = [];
    for (const line of lines) {
      const step = /^# then: (.+)$/.exec(line.trim());
      if (step !== null) {
        out.push({ step: step[1] ?? "" });
        continue;
      }
      if (/^[A-Z_][A-Z0-9_]*=/.test(line)) prelude.push(line);
      if (!line.startsWith("curl ")) continue;
      const expect = /#\s*expect (\d{3})(?: "([^"]*)")?\s*$/.exec(line);
      assert.ok(expect, `README of ${name}: a curl line without "# expect <status>": ${line}`);
      out.push({
        line: line.slice(0, expect.index).trim(),
        prelude: [...prelude],
        status: Number(expect[1]),
        ...(expect[2] !== undefined ? { contains: expect[2] } : {}),
      });
    }
  }
  return out;
}

/** Runs one README curl line with bash; returns its status code and body. */
export function runCurl(
  call: ReadmeCall,
  ports: ReadonlyMap<number, number>,
): Promise<{ status: number; body: string }> {
  const script = `${call.prelude.map((l) => withPorts(l, ports)).join("\n")}\n${withPorts(call.line, ports)} -sS --max-time 20 -w '\\n%{http_code}'`;
  return new Promise((resolve, reject) => {
    execFile("bash", ["-c", script], { timeout: 30_000 }, (err, stdout, stderr) => {
      if (err !== null) {
        reject(new Error(`${call.line}: ${err.message}\n${stderr}`));
        return;
      }
      const cut = stdout.lastIndexOf("\n");
      resolve({ status: Number(stdout.slice(cut + 1)), body: stdout.slice(0, cut) });
    });
  });
}

export interface RunningExample {
  readonly sluice: SluiceProcess;
  stop(): Promise<void>;
}

/** `sluice run -f <copy of examples/name with the ports moved>`. */
export async function runExample(name: string, ports: ReadonlyMap<number, number>): Promise<RunningExample> {
  const cfg = tempConfigDir();
  cpSync(exampleDir(name), cfg.dir, { recursive: true });
  for (const f of readdirSync(cfg.dir).filter((f) => f.endsWith(".yaml")))
    writeFileSync(join(cfg.dir, f), withPorts(readFileSync(join(cfg.dir, f), "utf8"), ports));
  const sluice = await startSluice("run", cfg.dir);
  return {
    sluice,
    async stop() {
      await sluice.stop();
      cfg.cleanup();
    },
  };
}

/**
 * Every call and step of the README in order. The first call is retried until it answers as expected (Envoy starting);
 * the others must answer right away.
 */
export async function runReadme(
  name: string,
  running: RunningExample,
  ports: ReadonlyMap<number, number>,
  steps: Readonly<Record<string, () => Promise<void>>> = {},
): Promise<number> {
  const all = readmeSteps(name);
  assert.ok(
    all.some((s) => "line" in s),
    `README of ${name} has no curl call`,
  );
  let calls = 0;
  for (const s of all) {
    if ("step" in s) {
      const run = steps[s.step];
      assert.ok(run, `README of ${name}: no test action for step "${s.step}"`);
      await run();
      continue;
    }
    const check = async () => {
      const r = await runCurl(s, ports);
      const ok = r.status === s.status && (s.contains === undefined || r.body.includes(s.contains));
      return { ok, r };
    };
    const first =
      calls === 0
        ? await waitFor(`${s.line} to answer ${s.status}`, async () => ((await check()).ok ? true : undefined), 45_000)
            .then(() => undefined)
            .catch((e: unknown) => {
              throw new Error(
                `${(e as Error).message}\n--- sluice run:\n${running.sluice.output.slice(-30).join("\n")}`,
              );
            })
        : undefined;
    if (first === undefined && calls > 0) {
      const { ok, r } = await check();
      assert.ok(
        ok,
        `${s.line}\n expected ${s.status}${s.contains !== undefined ? ` with "${s.contains}"` : ""}, got ${r.status}: ${r.body.slice(0, 500)}`,
      );
    }
    calls++;
  }
  return calls;
}
