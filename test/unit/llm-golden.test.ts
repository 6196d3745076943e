// Golden tests of the LLM translators: test/golden/llm/<client>--<provider>/<case>.in.{json,txt} → <case>.out.{json,txt}.
// Model lists between families: test/golden/llm/models-<client family>--<provider family>/<case>.in.json (the
// provider's answer, the client's call) → <case>.out.json (what the client gets).
// UPDATE_GOLDEN=1 rewrites outputs and deletes orphaned ones; otherwise orphans fail the run. Streams are also fed in
// small, uneven pieces and must give byte-identical output, which proves the stream path is incremental.
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { test } from "node:test";
import { listingAnswer } from "../../src/extproc/llm/models/list.js";
import { encodeJsonEvent, encodeJsonException } from "../../src/llm/codec/eventstream.js";
import type { LlmError } from "../../src/llm/errors.js";
import type { ClientFormat, ProviderFormat } from "../../src/llm/formats/names.js";
import { clientError, findDirection, translateError } from "../../src/llm/registry.js";
import type { RequestMeta, TranslateContext } from "../../src/llm/translate/context.js";
import { type ModelListFamily, readListPage } from "../../src/llm/translate/model-list.js";

const root = resolve(import.meta.dirname, "../../../test/golden/llm");
const update = process.env.UPDATE_GOLDEN === "1";

function ctx(): TranslateContext {
  let n = 0;
  return { id: (p) => `${p}${String(++n).padStart(3, "0")}`, now: () => 1700000000 };
}

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((a, p) => a + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

interface StreamIn {
  meta: RequestMeta;
  bytes: Uint8Array;
}

/** `.in.txt`: first line `#meta {...}`, then the provider's SSE bytes. `.in.json` kind stream: Bedrock events. */
function streamInput(file: string): StreamIn {
  if (file.endsWith(".txt")) {
    const text = readFileSync(file, "utf8");
    const nl = text.indexOf("\n");
    const meta = JSON.parse(text.slice(0, nl).replace(/^#meta /, "")) as RequestMeta;
    return { meta, bytes: new TextEncoder().encode(text.slice(nl + 1)) };
  }
  const j = JSON.parse(readFileSync(file, "utf8")) as {
    meta: RequestMeta;
    events: ({ type: string; body: unknown } | { exception: string; message: string })[];
  };
  const frames = j.events.map((e) =>
    "exception" in e ? encodeJsonException(e.exception, e.message) : encodeJsonEvent(e.type, e.body),
  );
  return { meta: j.meta, bytes: concat(frames) };
}

function runStream(client: ClientFormat, provider: ProviderFormat, input: StreamIn, split: number[]): string {
  const d = findDirection(client, provider);
  assert.ok(d?.stream, `${client}→${provider} has no stream translator`);
  let usage: unknown = "not reported";
  const t = d.stream(input.meta, ctx(), (u) => {
    usage = u ?? null;
  });
  const out: Uint8Array[] = [];
  let i = 0;
  let k = 0;
  while (i < input.bytes.length) {
    const n = split.length === 0 ? input.bytes.length : split[k++ % split.length]!;
    out.push(t.push(input.bytes.subarray(i, i + n)));
    i += n;
  }
  out.push(t.end());
  return `${new TextDecoder().decode(concat(out))}#usage ${JSON.stringify(usage)}\n`;
}

function runJson(client: ClientFormat, provider: ProviderFormat, input: Record<string, unknown>): unknown {
  const d = findDirection(client, provider);
  assert.ok(d, `no direction ${client}→${provider}`);
  switch (input.kind) {
    case "request": {
      const r = d.request(input.body, input.providerModel as string | undefined, ctx());
      return r.ok ? { body: r.body, meta: r.meta } : { error: translateErrorOf(client, r.error) };
    }
    case "response": {
      const r = d.response(input.body, input.meta as RequestMeta, ctx());
      return r.ok ? { body: r.body, usage: r.usage ?? null } : { error: translateErrorOf(client, r.error) };
    }
    case "error": {
      const body = typeof input.body === "string" ? input.body : JSON.stringify(input.body);
      const e = translateError(
        client,
        input.status as number,
        body,
        input.headers as Record<string, string> | undefined,
      );
      return { status: e.status, body: e.body };
    }
    default:
      throw new Error(`unknown kind ${String(input.kind)}`);
  }
}

/** A provider's model list answer (`status`, `body`) for the client's `call` (`list` with `query`, or `get` of `id`). */
function runModelList(client: ModelListFamily, provider: ModelListFamily, input: Record<string, unknown>): unknown {
  const call =
    input.call === "get"
      ? { op: "get" as const, id: String(input.id) }
      : { op: "list" as const, page: readListPage(new URLSearchParams(String(input.query ?? ""))) };
  const kind = typeof input.providerKind === "string" ? input.providerKind : provider;
  const text = typeof input.body === "string" ? input.body : JSON.stringify(input.body);
  return listingAnswer({ client, call, from: provider, kind }, Number(input.status ?? 200), text, {});
}

function translateErrorOf(client: ClientFormat, e: LlmError): unknown {
  return clientError(client, e);
}

const dirs = existsSync(root) ? readdirSync(root).sort() : [];
const orphans: string[] = [];

for (const dir of dirs) {
  const lists = dir.startsWith("models-");
  const [client, provider] = (lists ? dir.slice("models-".length) : dir).split("--") as [ClientFormat, ProviderFormat];
  const files = readdirSync(join(root, dir)).sort();
  for (const f of files) {
    const m = /^(.*)\.out\.(json|txt)$/.exec(f);
    if (m !== null && !files.some((g) => g.startsWith(`${m[1]}.in.`))) orphans.push(join(dir, f));
  }
  for (const f of files) {
    const m = /^(.*)\.in\.(json|txt)$/.exec(f);
    if (m === null) continue;
    const name = m[1]!;
    const inFile = join(root, dir, f);
    test(`golden ${dir}/${name}`, () => {
      const isStream =
        !lists &&
        (f.endsWith(".txt") || (JSON.parse(readFileSync(inFile, "utf8")) as { kind?: string }).kind === "stream");
      const outFile = join(root, dir, `${name}.out.${isStream ? "txt" : "json"}`);
      let actual: string;
      if (isStream) {
        const input = streamInput(inFile);
        actual = runStream(client, provider, input, []);
        // the same bytes in uneven small pieces (splitting lines, CRLFs, UTF-8 sequences and binary frames)
        for (const split of [[1], [3, 7, 2], [13, 1, 5]]) {
          assert.equal(
            runStream(client, provider, input, split),
            actual,
            `output differs when input is split ${JSON.stringify(split)}`,
          );
        }
      } else if (lists) {
        const input = JSON.parse(readFileSync(inFile, "utf8")) as Record<string, unknown>;
        const out = runModelList(client as ModelListFamily, provider as ModelListFamily, input);
        actual = `${JSON.stringify(out, null, 2)}\n`;
      } else {
        actual = `${JSON.stringify(runJson(client, provider, JSON.parse(readFileSync(inFile, "utf8")) as Record<string, unknown>), null, 2)}\n`;
      }
      if (update) writeFileSync(outFile, actual);
      else {
        assert.ok(existsSync(outFile), `missing ${outFile}; run with UPDATE_GOLDEN=1`);
        assert.equal(actual, readFileSync(outFile, "utf8"));
      }
    });
  }
}

test("no orphaned golden outputs", () => {
  if (update) {
    for (const o of orphans) rmSync(join(root, o));
    return;
  }
  assert.deepEqual(orphans, [], "golden outputs without an input (UPDATE_GOLDEN=1 deletes them)");
});
