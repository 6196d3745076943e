// Sluice's CRDs (deploy/crds) in a real kube-apiserver: every CRD is accepted and Established, so every
// x-kubernetes-validations rule compiled within the cost budgets (the API server refuses a CRD otherwise, and two
// probes show it does); and every document of the spec's tables is judged by the API server as by `sluice validate`:
// a valid one is accepted, an invalid one is refused naming its field, except the few only Sluice can catch, which are
// listed here by name with the reason.

import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { SLUICE_GROUP, SLUICE_KINDS, SLUICE_VERSION } from "../../src/api/sluice.js";
import { validateResource } from "../../src/api/validate.js";
import { projectRoot } from "../../src/cli/paths.js";
import { parseYamlFile } from "../../src/sources/yaml.js";
import { crdFiles, type KubeCluster, startKubeCluster, statusMessage, yamlObjects } from "../helpers/kube.js";
import { waitFor } from "../helpers/net.js";
import { caseDocument, LIMIT_CASES, RULE_CASES } from "../support/api-cases.js";
import { VALIDATE_CASES } from "../support/validate-cases.js";

type Json = Record<string, unknown>;

/** Invalid documents the API server accepts, so only Sluice refuses them (in `sluice validate` and in status). */
const SLUICE_ONLY = new Map<string, string>([
  [
    "case GwPolicy: CEL syntax error",
    "a CEL expression is a string to the CRD; its syntax is checked by Sluice (Kubernetes CEL cannot parse a string)",
  ],
  [
    "test/golden/translate/llm-provider-variants.in.yaml GwBackend bedrock-syntax",
    "sessionNameExpression is a CEL expression with a syntax error: a string to the CRD, checked by Sluice",
  ],
  ...["regex unterminated group", "regex lookbehind"].map(
    (name) =>
      [
        `case GwBackend: ${name}`,
        "a prompt guard pattern is a string to the CRD; Sluice compiles it with the LLM ext_proc's linear-time engine",
      ] as const,
  ),
  ...["GwPolicy: delay neither", "GwPolicy: extAuth cache ttl neither"].map(
    (name) =>
      [
        `case ${name}`,
        "a duration or CEL (or timestamp) in one string: Kubernetes CEL cannot parse the CEL alternative, Sluice does",
      ] as const,
  ),
  ...["inline JWKS not JSON", "inline JWKS keys not a list"].map(
    (name) =>
      [
        `case GwPolicy: ${name}`,
        "an inline JWKS is JSON in a string: Kubernetes CEL cannot parse JSON, Sluice does",
      ] as const,
  ),
  [
    "test/golden/translate/traffic-extauth-cache.in.yaml GwPolicy bad-ttl",
    "extAuth.cache.ttl neither a duration, a timestamp nor CEL that parses: a string to the CRD, checked by Sluice",
  ],
  ...["badjwt", "meta-bad", "rl-bad"].map(
    (name) =>
      [
        `test/golden/translate/traffic-context.in.yaml GwPolicy ${name}`,
        "CEL expressions with syntax errors (a JWT location, a metadataContext value, a rate-limit cost and entry): strings to the CRD, checked by Sluice",
      ] as const,
  ),
]);

let cluster: KubeCluster;
let ns: string;

before(async () => {
  cluster = await startKubeCluster();
  ns = await cluster.namespace("crds");
});
after(async () => {
  await cluster?.stop();
});

function rulesIn(node: unknown): number {
  if (Array.isArray(node)) return node.reduce((n: number, v) => n + rulesIn(v), 0);
  if (typeof node !== "object" || node === null) return 0;
  let n = 0;
  for (const [k, v] of Object.entries(node))
    n += k === "x-kubernetes-validations" ? (v as unknown[]).length : rulesIn(v);
  return n;
}

test("every CRD is accepted (its rules compile within the cost budgets), Established, and stored with every rule", async () => {
  const crds = crdFiles("experimental")
    .flatMap((f) => yamlObjects(readFileSync(f, "utf8")))
    .filter((d) => d.kind === "CustomResourceDefinition") as unknown as Json[];
  const sluice = crds.filter((c) => (c["spec"] as Json)["group"] === SLUICE_GROUP);
  assert.equal(sluice.length, SLUICE_KINDS.length);
  // One at a time, so that every refusal is reported, not only the first.
  const refused: string[] = [];
  for (const crd of crds) {
    await cluster.apply([crd]).catch((e: unknown) => refused.push((e as Error).message));
  }
  assert.deepEqual(refused, []);
  await Promise.all(
    crds.map(async (crd) => {
      const name = (crd["metadata"] as Json)["name"] as string;
      const stored = await waitFor(`CRD ${name} Established`, async () => {
        const r = await cluster.request("GET", `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${name}`);
        const got = JSON.parse(r.body) as { status?: { conditions?: { type: string; status: string }[] } };
        const established = got.status?.conditions?.find((c) => c.type === "Established");
        return established?.status === "True" ? (got as Json) : undefined;
      });
      const conditions = (stored["status"] as { conditions: { type: string; status: string }[] }).conditions;
      assert.equal(conditions.find((c) => c.type === "NamesAccepted")?.status, "True", name);
      assert.equal(
        conditions.find((c) => c.type === "NonStructuralSchema"),
        undefined,
        name,
      );
      // Every rule reached the server (a client that drops x-kubernetes-* keywords would hide them from this test).
      assert.equal(rulesIn(stored["spec"]), rulesIn(crd["spec"]), `${name}: rules stored`);
    }),
  );
  const sluiceRules = sluice.reduce((n, c) => n + rulesIn(c["spec"]), 0);
  assert.ok(sluiceRules >= 100, `expected the cross-field rules in Sluice's CRDs, found ${sluiceRules}`);
});

/** A one-field CRD whose spec carries `rule` over `fields`, for the probes. */
function probeCrd(plural: string, fields: Json, rule: string): Json {
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: `${plural}.probe.sluice.dev` },
    spec: {
      group: "probe.sluice.dev",
      scope: "Namespaced",
      names: { plural, singular: plural.slice(0, -1), kind: `${plural[0]!.toUpperCase()}${plural.slice(1, -1)}` },
      versions: [
        {
          name: "v1",
          served: true,
          storage: true,
          schema: {
            openAPIV3Schema: {
              type: "object",
              properties: {
                spec: { type: "object", properties: fields, "x-kubernetes-validations": [{ rule, message: "m" }] },
              },
            },
          },
        },
      ],
    },
  };
}

test("the API server refuses a rule that does not compile and one over the cost budget (so the test above can fail)", async () => {
  // The jwtSign rule as it was: CEL cannot see into a map of free-form JSON.
  const claims = { claims: { type: "object", additionalProperties: { "x-kubernetes-preserve-unknown-fields": true } } };
  await assert.rejects(
    cluster.apply([probeCrd("claimprobes", claims, "!has(self.claims) || !['iat'].exists(k, k in self.claims)")]),
    /undefined field 'claims'/,
  );
  // Every pair of an unbounded list of unbounded strings: an estimated cost far over the per-rule limit.
  const list = { items: { type: "array", items: { type: "string" } } };
  await assert.rejects(
    cluster.apply([probeCrd("costprobes", list, "self.items.all(x, self.items.all(y, x + y != ''))")]),
    /estimated rule cost exceeds budget.*cost total for entire OpenAPIv3 schema exceeds budget/s,
  );
});

interface Judged {
  readonly id: string;
  readonly doc: Json;
  /** The paths Sluice must report (one of them for golden documents); none for a valid document. */
  readonly paths: readonly string[];
}

/** Every case of the rules and limits tables, and every Sluice document of the golden inputs and examples. */
function documents(): Judged[] {
  const out: Judged[] = [];
  for (const c of [...RULE_CASES, ...LIMIT_CASES, ...VALIDATE_CASES]) {
    out.push({ id: `case ${c.kind}: ${c.name}`, doc: caseDocument(c), paths: c.error ? [c.error[0]] : [] });
  }
  const root = projectRoot();
  for (const dir of ["test/golden/policy", "test/golden/translate", "test/golden/llm", "examples/api"]) {
    const files = readdirSync(join(root, dir)).filter((f) => f.endsWith(dir === "examples/api" ? ".yaml" : ".in.yaml"));
    for (const f of files.sort()) {
      for (const d of parseYamlFile(f, readFileSync(join(root, dir, f), "utf8")).documents) {
        const v = d.value as Json;
        if (typeof v["apiVersion"] !== "string" || !v["apiVersion"].startsWith(`${SLUICE_GROUP}/`)) continue;
        const meta = v["metadata"] as Json;
        const errors = validateResource(v).problems.filter((p) => p.severity === "error");
        out.push({
          id: `${dir}/${f} ${String(v["kind"])} ${String(meta["name"])}`,
          doc: v,
          paths: errors.map((p) => p.path),
        });
      }
    }
  }
  return out;
}

/** Our path in the API server's spelling: map keys as `.key`, not `["key"]`. */
function apiServerPath(path: string): string {
  return path.replace(/\["((?:[^"\\]|\\.)*)"\]/g, (_, k: string) => `.${JSON.parse(`"${k}"`) as string}`);
}

/** The field paths an API server's refusal names: its causes, and the paths in a structured-merge message. */
function refusalPaths(body: string): string[] {
  const status = JSON.parse(body) as { message?: string; details?: { causes?: { field?: string }[] } };
  const out = (status.details?.causes ?? []).map((c) => c.field ?? "").filter((f) => f !== "" && f !== "<nil>");
  for (const m of (status.message ?? "").matchAll(/(?:^|\s)\.(spec[^\s:]*):/g)) out.push(m[1]!);
  return out;
}

/** Whether `named` is `path` or an ancestor of it more precise than the whole spec. */
function names(named: string, path: string): boolean {
  return named === path || (named !== "spec" && (path.startsWith(`${named}.`) || path.startsWith(`${named}[`)));
}

test("the spec's documents: the API server refuses each invalid one naming its field, or Sluice alone does, as listed", async () => {
  const docs = documents();
  assert.ok(docs.filter((d) => d.paths.length > 0).length >= 200, "the invalid documents of the tables");
  const problems: string[] = [];
  const sluiceOnlySeen = new Set<string>();
  let refusedByApiServer = 0;
  for (const [i, d] of docs.entries()) {
    const def = SLUICE_KINDS.find((k) => k.kind === d.doc["kind"]);
    assert.ok(def, d.id);
    const name = `d${i}`;
    const body = { ...d.doc, metadata: { name, namespace: ns } };
    // Dry run: validated (schema, CEL rules) as a real write, nothing stored.
    const path = `/apis/${SLUICE_GROUP}/${SLUICE_VERSION}/namespaces/${ns}/${def.plural}/${name}`;
    const r = await cluster.request(
      "PATCH",
      `${path}?fieldManager=kube-crds-test&force=true&dryRun=All&fieldValidation=Strict`,
      body,
      "application/apply-patch+yaml",
    );
    const sluiceErrors = validateResource(body)
      .problems.filter((p) => p.severity === "error")
      .map((p) => p.path);
    const sluiceOnly = SLUICE_ONLY.has(d.id);
    if (sluiceOnly) sluiceOnlySeen.add(d.id);
    if (d.paths.length === 0) {
      if (sluiceErrors.length > 0) problems.push(`${d.id}: valid, but Sluice refuses ${sluiceErrors.join(", ")}`);
      if (r.status >= 300) problems.push(`${d.id}: valid, but the API server refuses: ${statusMessage(r)}`);
      continue;
    }
    if (!d.paths.some((p) => sluiceErrors.includes(p)))
      problems.push(`${d.id}: Sluice should refuse ${d.paths.join(" or ")}, got ${sluiceErrors.join(", ") || "none"}`);
    if (sluiceOnly) {
      if (r.status < 300) continue;
      problems.push(`${d.id}: listed as Sluice-only, but the API server refuses it: ${statusMessage(r)}`);
    } else if (r.status < 300) {
      problems.push(`${d.id}: the API server accepts it (Sluice refuses ${d.paths.join(", ")})`);
    } else {
      refusedByApiServer++;
      const named = refusalPaths(r.body);
      const wanted = d.paths.map(apiServerPath);
      if (!named.some((n) => wanted.some((w) => names(n, w))))
        problems.push(`${d.id}: refused without naming ${wanted.join(" or ")}: ${statusMessage(r)}`);
    }
  }
  assert.deepEqual(problems, []);
  assert.deepEqual(
    [...SLUICE_ONLY.keys()].filter((k) => !sluiceOnlySeen.has(k)),
    [],
    "stale SLUICE_ONLY entries",
  );
  assert.ok(refusedByApiServer >= 200, `refused by the API server: ${refusedByApiServer}`);
});
