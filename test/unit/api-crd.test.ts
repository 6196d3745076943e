// The generated CRDs are structural (apiextensions.k8s.io/v1 rules), every x-kubernetes-validations rule parses as
// CEL, the committed generated files are up to date, and the examples validate.

import assert from "node:assert/strict";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { test } from "node:test";
import { parse } from "@bufbuild/cel";
import { allCrds } from "../../src/api/crd.js";
import { exampleFile, generatedFiles } from "../../src/api/generate.js";
import { SLUICE_KINDS } from "../../src/api/sluice.js";
import { validateResource } from "../../src/api/validate.js";
import { parseYamlFile } from "../../src/sources/yaml.js";

type Node = Record<string, unknown>;
const root = join(import.meta.dirname, "../../..");

/** Paths (with [] for items and {} for map values) where unknown fields are preserved on purpose: free-form JSON. */
const PRESERVE_ALLOWED = [
  /\.claims$/,
  /\.resourceMetadata\.\{\}$/,
  /\.(defaults|overrides)\[\]\.value$/,
  /^spec\.rawConfig$/,
  /^spec\.resources$/,
  /^spec\.env\[\]\.valueFrom$/,
  /^spec\.(deployment|daemonSet|service|serviceAccount|podDisruptionBudget|horizontalPodAutoscaler)\.spec$/,
  /^status$/,
];

function structuralProblems(node: Node, path: string, out: string[], preserved: string[]): void {
  const intOrString = node["x-kubernetes-int-or-string"] === true;
  const preserve = node["x-kubernetes-preserve-unknown-fields"] === true;
  if (preserve) preserved.push(path);
  if (node["type"] === undefined && !intOrString && !preserve) out.push(`${path}: no type`);
  if (node["properties"] !== undefined && node["additionalProperties"] !== undefined)
    out.push(`${path}: properties and additionalProperties together`);
  if (node["additionalProperties"] === false) out.push(`${path}: additionalProperties: false`);
  if (node["type"] === "array" && node["items"] === undefined) out.push(`${path}: array without items`);
  for (const k of ["oneOf", "allOf", "not", "$ref", "definitions", "nullable"])
    if (k in node) out.push(`${path}: ${k}`);
  if (node["anyOf"] !== undefined) {
    const ok =
      intOrString && JSON.stringify(node["anyOf"]) === JSON.stringify([{ type: "integer" }, { type: "string" }]);
    if (!ok) out.push(`${path}: anyOf other than the int-or-string form`);
  }
  for (const k of Object.keys(node)) if (k.startsWith("x-sluice")) out.push(`${path}: ${k} left in`);
  for (const r of (node["x-kubernetes-validations"] as { rule: string; message: string }[] | undefined) ?? []) {
    if (typeof r.message !== "string" || r.message === "") out.push(`${path}: rule without message`);
    try {
      parse(r.rule);
    } catch (e) {
      out.push(`${path}: rule ${r.rule} does not parse: ${e instanceof Error ? e.message : e}`);
    }
  }
  const props = node["properties"] as Record<string, Node> | undefined;
  for (const [k, v] of Object.entries(props ?? {}))
    structuralProblems(v, path === "" ? k : `${path}.${k}`, out, preserved);
  if (node["items"] !== undefined) structuralProblems(node["items"] as Node, `${path}[]`, out, preserved);
  if (typeof node["additionalProperties"] === "object")
    structuralProblems(node["additionalProperties"] as Node, `${path}.{}`, out, preserved);
}

test("CRDs are structural, their CEL rules parse, and unknown fields are preserved only where intended", () => {
  let rules = 0;
  for (const { crd } of allCrds()) {
    const version = (crd["spec"] as { versions: Node[] }).versions[0]!;
    assert.deepEqual(version["subresources"], { status: {} });
    assert.ok((version["additionalPrinterColumns"] as unknown[]).length > 0);
    const schema = (version["schema"] as { openAPIV3Schema: Node }).openAPIV3Schema;
    assert.equal(schema["type"], "object");
    assert.ok(typeof schema["description"] === "string");
    const problems: string[] = [];
    const preserved: string[] = [];
    const props = schema["properties"] as Record<string, Node>;
    for (const [k, v] of Object.entries(props)) structuralProblems(v, k, problems, preserved);
    assert.deepEqual(problems, []);
    const unexpected = preserved.filter((p) => !PRESERVE_ALLOWED.some((r) => r.test(p)));
    assert.deepEqual(unexpected, [], "x-kubernetes-preserve-unknown-fields only on free-form JSON fields");
    rules += JSON.stringify(schema).split('"x-kubernetes-validations"').length - 1;
  }
  assert.ok(rules >= 50, `expected the cross-field rules in the CRDs, found ${rules} rule lists`);
});

test("every spec field has a description or is described by its parent type", () => {
  const crd = allCrds().find((c) => c.file.includes("gwpolicies"))!.crd;
  const text = JSON.stringify(crd);
  assert.ok(text.includes("Exactly") || text.includes("exactly one of targetRefs and targetSelectors must be set"));
});

test("committed CRDs and docs are up to date (npm run gen:api)", async () => {
  const examples = new Map<string, string>();
  for (const def of SLUICE_KINDS) examples.set(def.kind, await readFile(join(root, exampleFile(def.kind)), "utf8"));
  for (const [file, content] of generatedFiles(examples)) {
    const committed = await readFile(join(root, file), "utf8").catch(() => "(missing)");
    assert.equal(committed, content, `${file} is stale: run npm run gen:api`);
  }
});

test("every example under examples/api validates with no problem", async () => {
  const dir = join(root, "examples/api");
  const files = (await readdir(dir)).filter((f) => f.endsWith(".yaml"));
  assert.ok(files.length >= SLUICE_KINDS.length);
  let n = 0;
  for (const f of files) {
    const parsed = parseYamlFile(f, await readFile(join(dir, f), "utf8"));
    assert.deepEqual(parsed.problems, []);
    for (const d of parsed.documents) {
      const r = validateResource(d.value);
      assert.deepEqual(r.problems, [], `${f}: ${JSON.stringify(r.problems)}`);
      assert.ok(r.resource);
      n++;
    }
  }
  for (const def of SLUICE_KINDS) assert.ok(files.includes(exampleFile(def.kind).split("/").pop()!));
  assert.ok(n >= 8);
});
