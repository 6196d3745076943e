// A Service backend's transformation across attempts (extproc/attempt-journal.ts): the journal an attempt seals into the
// request's dynamic metadata opens only here and untouched, and the next attempt's stream undoes what it records, so
// each attempt's changes apply to the request as the client sent it. The e2e proof through Envoy's retries is
// test/e2e/backend-transformation-retry.test.ts.

import assert from "node:assert/strict";
import { test } from "node:test";
import {
  ATTEMPT_JOURNAL_FIELD,
  ATTEMPT_METADATA_NAMESPACE,
  type AttemptJournal,
  openJournal,
  sealJournal,
} from "../../src/extproc/attempt-journal.js";
import type { ExtProcRequest, Reply } from "../../src/extproc/llm/wire.js";
import {
  serveTransformation,
  type TransformationCall,
  type TransformationSpec,
} from "../../src/extproc/transformation.js";

test("a sealed journal opens to the same entries; tampered, truncated or foreign text does not open", () => {
  const journal: AttemptJournal = new Map([
    ["x-count", { original: "0", written: "01" }],
    ["x-new", { written: "n" }],
    ["authorization", { original: "Bearer client" }],
  ]);
  const sealed = sealJournal(journal);
  assert.doesNotMatch(sealed, /client|x-count/);
  assert.deepEqual(openJournal(sealed), journal);
  // A fresh IV each time: the same journal never seals to the same text.
  assert.notEqual(sealJournal(journal), sealed);
  const raw = Buffer.from(sealed, "base64url");
  raw[raw.length - 1] = (raw[raw.length - 1] ?? 0) ^ 1;
  assert.equal(openJournal(raw.toString("base64url")), undefined);
  assert.equal(openJournal(sealed.slice(0, 20)), undefined);
  assert.equal(openJournal(Buffer.from(JSON.stringify([["x-a", null, "v"]])).toString("base64url")), undefined);
  // Empty: nothing to undo.
  assert.equal(sealJournal(new Map()), "");
  assert.deepEqual(openJournal(""), new Map());
});

const SPEC: TransformationSpec = {
  entries: [
    {
      request: {
        set: [{ name: "x-count", value: "request.headers['x-count'] + '1'" }],
        add: [{ name: "x-added", value: "'v'" }],
        remove: ["x-secret"],
      },
    },
  ],
  journal: true,
  requestBody: false,
  responseBody: false,
};

const enc = new TextEncoder();

/** One attempt's stream: its request headers, and the journal in its metadata as Envoy forwards it. */
function attempt(spec: TransformationSpec, h: Record<string, string>, sealed?: string) {
  const out: Reply[] = [];
  const logs: string[] = [];
  const on: Record<string, (x?: unknown) => void> = {};
  const call: TransformationCall = {
    on: ((event: string, fn: (x?: unknown) => void) => {
      on[event] = fn;
    }) as TransformationCall["on"],
    write: (r) => out.push(r),
    end: () => {},
  };
  serveTransformation(call, spec, (m) => logs.push(m));
  const req: ExtProcRequest = {
    request: {
      case: "requestHeaders",
      value: {
        headers: { headers: Object.entries(h).map(([key, v]) => ({ key, value: "", rawValue: enc.encode(v) })) },
        endOfStream: true,
      },
    },
    attributes: {},
    ...(sealed !== undefined
      ? { metadataContext: { filterMetadata: { [ATTEMPT_METADATA_NAMESPACE]: { [ATTEMPT_JOURNAL_FIELD]: sealed } } } }
      : {}),
  };
  on.data?.(req);
  const [reply] = out;
  assert.ok(reply !== undefined && reply.phase === "requestHeaders");
  const journal = (reply.metadata?.[ATTEMPT_METADATA_NAMESPACE] as Record<string, string> | undefined)?.[
    ATTEMPT_JOURNAL_FIELD
  ];
  return { headers: reply.headers, journal, logs };
}

test("each attempt undoes the previous one's changes from the journal it sealed into the request's metadata", () => {
  const client = { ":path": "/p", "x-count": "0", "x-added": "c", "x-secret": "s3" };
  const first = attempt(SPEC, client);
  assert.deepEqual(first.headers, { set: { "x-count": "01" }, add: [["x-added", "v"]], remove: ["x-secret"] });
  assert.ok(first.journal !== undefined && first.journal !== "");
  // Envoy's header map after attempt 1, as the retry's stream sees it.
  const after = { ":path": "/p", "x-count": "01", "x-added": "c,v" };
  const second = attempt(SPEC, after, first.journal);
  assert.deepEqual(second.headers, {
    set: { "x-count": "01", "x-added": "c" },
    add: [["x-added", "v"]],
    remove: ["x-secret"],
  });
  // Attempt 3 undoes attempt 2 (not attempt 1 again): the same answer.
  const third = attempt(SPEC, after, second.journal);
  assert.deepEqual(third.headers, second.headers);
  // A header changed since by someone else is left as it is.
  const changed = attempt(SPEC, { ...after, "x-count": "7" }, first.journal);
  assert.equal(changed.headers?.set["x-count"], "71");
});

test("a journal that does not open undoes nothing, and says so; without `journal` nothing is sealed", () => {
  const first = attempt(SPEC, { "x-count": "0" });
  const forged = attempt(SPEC, { "x-count": "01" }, `${first.journal}x`);
  assert.equal(forged.headers?.set["x-count"], "011");
  assert.match(forged.logs.join("\n"), /cannot be opened; nothing undone/);
  // The route-level transformation (no retries) and an AI cluster's (`llm`) have no journal in metadata.
  const plain = attempt({ ...SPEC, journal: false }, { "x-count": "01" }, first.journal);
  assert.equal(plain.headers?.set["x-count"], "011");
  assert.equal(plain.journal, undefined);
  const llm = attempt({ ...SPEC, llm: true }, { "x-count": "01" }, first.journal);
  assert.equal(llm.journal, undefined);
});

test("a rewritten body's content-length is undone too (on a Service, only the transformation writes it)", () => {
  const spec: TransformationSpec = {
    entries: [{ request: { body: "'{\"wrapped\":' + request.body + '}'" } }],
    journal: true,
    requestBody: true,
    responseBody: false,
  };
  const first = attempt(spec, { "content-length": "0" });
  assert.equal(first.headers?.set["content-length"], String(Buffer.byteLength('{"wrapped":}')));
  const second = attempt(spec, { "content-length": first.headers?.set["content-length"] ?? "" }, first.journal);
  // Restored, then written again for this attempt's body: the mutation carries the value written.
  assert.equal(second.headers?.set["content-length"], first.headers?.set["content-length"]);
  const journal = openJournal(second.journal ?? "");
  assert.deepEqual(journal?.get("content-length"), { original: "0", written: "12" });
});
