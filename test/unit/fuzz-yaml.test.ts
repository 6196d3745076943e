// Fuzzing the YAML loader (src/sources/yaml.ts) and the resource validator (src/api/validate.ts): any text loads
// into documents or line-numbered problems, never an exception; any document validates into a resource or problems;
// hostile shapes (alias bombs, deep nesting, huge scalars) finish in bounded time.

import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { validateResource } from "../../src/api/validate.js";
import { parseYamlFile } from "../../src/sources/yaml.js";
import { holds, within } from "./fuzz-support.js";

const KINDS = ["Gateway", "HTTPRoute", "Backend", "SecurityPolicy", "TrafficPolicy", "GRPCRoute", "GwModel", "Secret"];

/** Loads and validates every document: nothing may throw, and a document is a resource or has a problem. */
function loadAndValidate(text: string, ms = 2000): void {
  within(ms, "load and validate", () => {
    const parsed = parseYamlFile("fuzz.yaml", text);
    for (const p of parsed.problems) assert.ok(p.line >= 1 && p.message.length > 0);
    for (const d of parsed.documents) {
      const r = validateResource(d.value);
      assert.ok(r.resource !== undefined || r.problems.length > 0, "neither a resource nor a problem");
      if (r.problems.length > 0) void d.source.line;
    }
  });
}

const yamlish = fc.string({
  unit: fc.oneof(
    {
      weight: 5,
      arbitrary: fc.constantFrom(
        "a",
        "b",
        "1",
        " ",
        "  ",
        "\n",
        ":",
        "- ",
        "{",
        "}",
        "[",
        "]",
        ",",
        "'",
        '"',
        "&x",
        "*x",
        "!!str ",
        "#",
        "---\n",
        "|",
        ">",
        "?",
        "\t",
        "%",
      ),
    },
    { weight: 1, arbitrary: fc.string({ maxLength: 3 }) },
  ),
  maxLength: 200,
});

test("YAML: any text loads into documents or line-numbered problems, and validation never throws", () =>
  holds(
    "yaml arbitrary text",
    fc.property(yamlish, (text) => loadAndValidate(text)),
  ));

const jsonish = fc.letrec<{ v: unknown }>((tie) => ({
  v: fc.oneof(
    { depthSize: "small" },
    fc.constantFrom(null, true, 0, -1, 1.5, "", "x", "sluice.dev/v1alpha1", "gateway.networking.k8s.io/v1", ...KINDS),
    fc.string({ maxLength: 10 }),
    fc.array(tie("v"), { maxLength: 4 }),
    fc.dictionary(
      fc.constantFrom(
        "apiVersion",
        "kind",
        "metadata",
        "name",
        "namespace",
        "spec",
        "rules",
        "targetRefs",
        "parentRefs",
        "__proto__",
        "constructor",
        "x",
      ),
      tie("v"),
      { maxKeys: 5 },
    ),
  ),
})).v;

test("validation: documents of any shape, with envelopes of real kinds, are a resource or problems", () =>
  holds(
    "validate arbitrary documents",
    fc.property(
      fc.constantFrom(...KINDS),
      fc.constantFrom("gateway.networking.k8s.io/v1", "sluice.dev/v1alpha1"),
      jsonish,
      jsonish,
      (kind, apiVersion, metadata, spec) => {
        within(1000, "validate", () => {
          const r = validateResource({ apiVersion, kind, metadata, spec });
          assert.ok(r.resource !== undefined || r.problems.length > 0);
        });
      },
    ),
  ));

test("YAML: alias bombs, deep nesting and huge scalars load and validate in bounded time", () => {
  // Each level refers to the one below nine times: 9^8 paths through 8 small nodes.
  let bomb = "a0: &a0 [x, x, x, x, x, x, x, x, x]\n";
  for (let i = 1; i <= 8; i++) bomb += `a${i}: &a${i} [${Array.from({ length: 9 }, () => `*a${i - 1}`).join(", ")}]\n`;
  loadAndValidate(
    `apiVersion: sluice.dev/v1alpha1\nkind: TrafficPolicy\nmetadata: {name: p}\nspec:\n  ${bomb.replace(/\n/g, "\n  ")}`,
    5000,
  );
  loadAndValidate(
    `apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ndata: ${"[".repeat(5000)}${"]".repeat(5000)}\n`,
    5000,
  );
  loadAndValidate(`${"- ".repeat(2000)}x\n`, 5000);
  loadAndValidate(
    `apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: "${"n".repeat(1_000_000)}"}\n`,
    5000,
  );
});
