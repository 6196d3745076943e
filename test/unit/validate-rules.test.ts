// Issue 22's validation, table-driven (test/support/validate-cases.ts): every invalid case is refused with exactly its
// field path and message, by the validator, by the CRDs' CEL rules (evaluated with @bufbuild/cel plus Kubernetes'
// quantity functions, next to each rule's TypeScript form) and by the `sluice validate` command on one file holding
// them all; every valid case passes all three. The same documents go to a real kube-apiserver in kube-crds.test.ts.

import assert from "node:assert/strict";
import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";
import { isCelError, run } from "@bufbuild/cel";
import { stringify } from "yaml";
import { checkValue } from "../../src/api/check.js";
import { ACCESS_LOG_FIELDS } from "../../src/api/policy.js";
import type { Rule } from "../../src/api/schema-kit.js";
import { SLUICE_KINDS } from "../../src/api/sluice.js";
import { validateResource } from "../../src/api/validate.js";
import { runValidate } from "../../src/cli/validate.js";
import { DEFAULT_LOG_FIELDS } from "../../src/translate/xds/frontend.js";
import { type Case, caseDocument, LIMIT_CASES, RULE_CASES } from "../support/api-cases.js";
import { KUBE_CEL } from "../support/kube-cel.js";
import { VALIDATE_CASES } from "../support/validate-cases.js";

type Schema = Record<string, unknown>;

/** The CEL rules that refuse `value`, each as `path: message`; and where CEL and TypeScript disagree. */
function celVerdicts(schema: Schema, value: unknown, path: string, refused: string[], disagree: string[]): void {
  for (const r of (schema["x-kubernetes-validations"] as readonly Rule[] | undefined) ?? []) {
    const cel = run(r.rule, { self: value as never }, KUBE_CEL);
    const ts = r.check(value);
    if (isCelError(cel) || cel !== ts) disagree.push(`${path}: ${r.rule} -> CEL ${String(cel)}, TypeScript ${ts}`);
    if (cel === false) refused.push(`${path}${r.locate?.(value) ?? r.fieldPath ?? ""}: ${r.message}`);
  }
  if (Array.isArray(value) && schema["items"] !== undefined) {
    value.forEach((v, i) => {
      celVerdicts(schema["items"] as Schema, v, `${path}[${i}]`, refused, disagree);
    });
  } else if (typeof value === "object" && value !== null && !Array.isArray(value)) {
    const props = schema["properties"] as Record<string, Schema> | undefined;
    const add = schema["additionalProperties"];
    for (const [k, v] of Object.entries(value)) {
      const s = props?.[k] ?? (typeof add === "object" ? (add as Schema) : undefined);
      if (s !== undefined) celVerdicts(s, v, `${path}.${k}`, refused, disagree);
    }
  }
}

function errorsOf(c: Case): string[] {
  return validateResource(caseDocument(c))
    .problems.filter((p) => p.severity === "error")
    .map((p) => `${p.path}: ${p.message}`);
}

describe("issue 22 validation: validator and CEL", () => {
  for (const c of VALIDATE_CASES) {
    test(`${c.kind}: ${c.name}`, () => {
      const errors = errorsOf(c);
      const def = SLUICE_KINDS.find((k) => k.kind === c.kind)!;
      const defaulted = checkValue(def.spec as unknown as Schema, c.spec, "spec", []);
      const refused: string[] = [];
      const disagree: string[] = [];
      celVerdicts(def.spec as unknown as Schema, defaulted, "spec", refused, disagree);
      assert.deepEqual(disagree, [], "CEL and TypeScript forms agree");
      if (c.error === undefined) {
        assert.deepEqual(errors, [], "a valid document");
        assert.deepEqual(refused, [], "no CEL rule refuses it");
        return;
      }
      const want = `${c.error[0]}: ${c.error[1]}`;
      // The one problem of the case, exactly (a structural error is the only problem when it is one).
      assert.ok(
        // (A value's own error may add what it got, or a parser's detail after a colon.)
        errors.some((e) => e === want || e.startsWith(`${want} (got `) || e.startsWith(`${want}: `)),
        `want ${want}\n got ${errors.join("\n     ")}`,
      );
      assert.equal(errors.length, 1, errors.join("\n"));
      // A rule-made error is refused by the same CEL rule, at the same path, with the same message (a type, pattern,
      // required or format error is the schema's own: "must be/start/match ...", "must not be empty", "required field is missing", or
      // "invalid ..." for a format only Sluice reads).
      if (!/^(must (be|start|match|not be empty)|invalid |required field)/.test(c.error[1]))
        assert.deepEqual(refused, [want]);
    });
  }
});

test("sluice validate reports every case of the table at its field, with file, line and resource", async () => {
  const dir = await mkdtemp(join(tmpdir(), "sluice-validate-22-"));
  const file = join(dir, "cases.yaml");
  const docs = VALIDATE_CASES.map((c, i) => ({ ...caseDocument(c), metadata: { name: `c${i}`, namespace: "ns" } }));
  await writeFile(file, docs.map((d) => stringify(d)).join("---\n"));
  let out = "";
  const code = await runValidate(["-f", file, "--output", "json"], {
    stdout: (s) => {
      out += s;
    },
    stderr: () => {},
  });
  assert.equal(code, 1);
  const report = JSON.parse(out) as {
    problems: { file: string; line: number; resource: string; path: string; message: string; severity: string }[];
  };
  const invalid = VALIDATE_CASES.flatMap((c, i) => (c.error === undefined ? [] : [[i, c.error] as const]));
  for (const [i, [path, message]] of invalid) {
    const c = VALIDATE_CASES[i]!;
    const hit = report.problems.find(
      (p) => p.resource === `${c.kind} ns/c${i}` && p.path === path && p.message.startsWith(message),
    );
    assert.ok(hit, `${c.name}: ${path}: ${message}`);
    assert.equal(hit.file, file);
    assert.ok(hit.line > 0);
  }
  // Valid cases report nothing.
  const validNames = new Set(VALIDATE_CASES.flatMap((c, i) => (c.error === undefined ? [`${c.kind} ns/c${i}`] : [])));
  assert.deepEqual(
    report.problems.filter((p) => validNames.has(p.resource)),
    [],
  );
  assert.equal(report.problems.filter((p) => p.severity === "error").length, invalid.length);
});

test("accessLog attributes.remove accepts exactly the fields an access log entry has", () => {
  // The schema's enum and the translator's default entry are one list: a field added to the entry is removable.
  assert.deepEqual([...ACCESS_LOG_FIELDS].sort(), Object.keys(DEFAULT_LOG_FIELDS).sort());
});

test("every cross-field rule of the schemas has a bad input refused with its message", () => {
  const messages = new Set<string>();
  const seen = new Set<unknown>();
  const walk = (node: Schema | undefined): void => {
    if (node === undefined || seen.has(node)) return;
    seen.add(node);
    for (const r of (node["x-kubernetes-validations"] as readonly Rule[] | undefined) ?? []) messages.add(r.message);
    for (const p of Object.values((node["properties"] as Record<string, Schema> | undefined) ?? {})) walk(p);
    walk(node["items"] as Schema | undefined);
    const add = node["additionalProperties"];
    if (typeof add === "object" && add !== null) walk(add as Schema);
  };
  for (const def of SLUICE_KINDS) walk(def.spec as unknown as Schema);
  // A case may give the start of a message (the rest names what it got) or, in api-cases, a fragment of it.
  const refused = [...RULE_CASES, ...LIMIT_CASES, ...VALIDATE_CASES].flatMap((c) => (c.error ? [c.error[1]] : []));
  const without = [...messages].filter((m) => !refused.some((e) => m.startsWith(e)));
  assert.ok(messages.size >= 90, `rules found: ${messages.size}`);
  assert.deepEqual(without, [], "rules without a bad-input case");
});
