// h2spec (github.com/summerwind/h2spec, built by scripts/setup.d/h2spec.sh) against Sluice's own HTTP/2 server
// (src/grpc/unary-server.ts), h2c with prior knowledge, strict mode: every case passes except those docs/http2.md
// lists as not applying, and each of those fails for the reason given there (a case that starts passing must leave
// the list). Two set-ups of the same server: as the ext_authz port runs it (HTTP/1.1 on the same port), and HTTP/2
// alone (as the ext_proc floor in bench/ runs it).

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import type { BidiHandler } from "../../src/grpc/unary-server.js";
import { UnaryGrpcServer } from "../../src/grpc/unary-server.js";

const root = fileURLToPath(new URL("../../..", import.meta.url));

function h2specBinary(): string {
  const script = readFileSync(join(root, "scripts/setup.d/h2spec.sh"), "utf8");
  const version = /H2SPEC_VERSION:-([^}+]+)/.exec(script)?.[1];
  assert.ok(version, "scripts/setup.d/h2spec.sh names no H2SPEC_VERSION");
  const path = join(root, ".cache", `h2spec-${version}`, "h2spec");
  if (!existsSync(path)) throw new Error(`${path} is missing: run scripts/setup.d/h2spec.sh (or npm run setup)`);
  return path;
}

/**
 * Cases that fail by design, by set-up, with the reason (docs/http2.md, "h2spec"). Keyed `package: title`.
 */
const NOT_APPLICABLE: Record<string, Record<string, string>> = {
  "h2c and HTTP/1.1": {
    // The port also serves HTTP/1.1 (Envoy's HTTP ext_authz): bytes that are not the HTTP/2 preface are an HTTP/1.1
    // request, and this one is answered 400 Bad Request before the connection is closed, as RFC 9112 asks.
    "http2/3.5: Sends invalid connection preface": "an HTTP/1.1 port answers a malformed request line with 400",
  },
  "h2c only": {},
};

/** The service h2spec calls (its requests go to "/"): answers one message when the client's side ends, 20 ms later. */
const echoAtEnd: BidiHandler = (call) => {
  call.on("data", () => {});
  call.on("error", () => {});
  call.on("end", () =>
    setTimeout(() => {
      call.write(new Uint8Array([1, 2, 3]));
      call.end();
    }, 20),
  );
};

interface Outcome {
  readonly total: number;
  readonly failed: Map<string, string>;
  readonly skipped: string[];
}

/** The JUnit report: each testcase's package and title, and whether it failed (failure or error) or was skipped. */
function parseJunit(xml: string): Outcome {
  const failed = new Map<string, string>();
  const skipped: string[] = [];
  let total = 0;
  const re = /<testcase package="([^"]*)" classname="([^"]*)"[^>]*?(\/>|>([\s\S]*?)<\/testcase>)/g;
  for (const m of xml.matchAll(re)) {
    total++;
    const key = `${m[1]}: ${m[2]}`;
    const body = m[4] ?? "";
    if (/<(failure|error)/.test(body)) failed.set(key, body.replace(/<[^>]+>/g, "").trim());
    else if (/<skipped/.test(body)) skipped.push(key);
  }
  return { total, failed, skipped };
}

async function runH2spec(port: number): Promise<Outcome> {
  const dir = mkdtempSync(join(tmpdir(), "h2spec-"));
  try {
    const report = join(dir, "report.xml");
    await new Promise<void>((resolve) => {
      // h2spec exits non-zero when a case fails: the report says which.
      execFile(
        h2specBinary(),
        ["--strict", "-h", "127.0.0.1", "-p", String(port), "-o", "2", "-j", report],
        { timeout: 240_000 },
        () => resolve(),
      );
    });
    return parseJunit(readFileSync(report, "utf8"));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

for (const [setup, expected] of Object.entries(NOT_APPLICABLE)) {
  test(`h2spec --strict, ${setup}: every case passes but those listed as not applicable`, async () => {
    const logged: string[] = [];
    const server = new UnaryGrpcServer(new Map(), new Map([["/", echoAtEnd]]), {
      log: (line) => logged.push(line),
      ...(setup === "h2c and HTTP/1.1" ? { http1: () => ({ status: 200 }) } : {}),
      // Low enough that h2spec's concurrency case (one stream above the limit) stays quick.
      limits: { maxConcurrentStreams: 100 },
    });
    const port = await server.start("127.0.0.1", 0);
    try {
      const outcome = await runH2spec(port);
      assert.ok(outcome.total >= 146, `h2spec ran ${outcome.total} cases, expected its 146 (strict)`);
      assert.deepEqual(outcome.skipped, [], "no case is skipped");
      const unexpected = [...outcome.failed].filter(([k]) => expected[k] === undefined);
      assert.deepEqual(unexpected, [], "cases that fail and are not listed as not applicable");
      const nowPassing = Object.keys(expected).filter((k) => !outcome.failed.has(k));
      assert.deepEqual(nowPassing, [], "cases listed as not applicable that pass: take them off the list");
      // Nothing h2spec sent made the server hit a bug of its own (those are logged as "gRPC server: ...").
      assert.deepEqual(
        logged.filter((l) => l.startsWith("gRPC server")),
        [],
      );
    } finally {
      await server.stop();
    }
  });
}
