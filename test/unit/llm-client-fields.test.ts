// The Messages and Responses client field tables of docs/llm.md are the code's (src/llm/translate/client-fields.ts),
// and each claim in them holds: for every row, example and target, the translator is run with and without the example;
// "carried" changes what the provider gets (body or streaming), "ignored" changes nothing, "refused" is a 400 naming
// the field.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { test } from "node:test";
import { findDirection } from "../../src/llm/registry.js";
import { CLIENT_FIELD_TABLES, clientFieldsMarkdown } from "../../src/llm/translate/client-fields.js";

const ctx = { id: (p: string) => `${p}1`, now: () => 1700000000 };

test("docs/llm.md shows the Messages and Responses client tables the code claims", () => {
  const doc = readFileSync(resolve(import.meta.dirname, "../../../docs/llm.md"), "utf8");
  for (const t of CLIENT_FIELD_TABLES)
    assert.ok(doc.includes(clientFieldsMarkdown(t)), `docs/llm.md's ${t.client} table differs from the code's`);
});

for (const t of CLIENT_FIELD_TABLES) {
  for (const row of t.rows) {
    for (const [target] of t.targets) {
      const claim = row.to[target];
      test(`${t.client} ${row.field} → ${target}: ${claim?.[0]}`, () => {
        assert.ok(claim !== undefined, "every row says what becomes of it for every target");
        const d = findDirection(t.client, target);
        assert.ok(d !== undefined);
        const plain = d.request(t.base, t.model, ctx);
        assert.equal(plain.ok, true);
        const seen = (r: typeof plain) => (r.ok ? JSON.stringify({ body: r.body, stream: r.meta.stream }) : "");
        for (const example of Array.isArray(row.example) ? row.example : [row.example]) {
          const r = d.request({ ...t.base, ...example }, t.model, ctx);
          const label = JSON.stringify(example);
          if (claim[0] === "refused") {
            assert.equal(r.ok, false, `${label} is refused`);
            if (!r.ok) {
              assert.equal(r.error.status, 400);
              const named = Object.keys(example).some(
                (k) => r.error.param?.startsWith(k) === true || r.error.message.includes(k),
              );
              assert.ok(
                named || /tools|messages/.test(r.error.param ?? r.error.message),
                `${label}: ${r.error.message}`,
              );
            }
          } else {
            assert.equal(r.ok, true, `${label}: ${JSON.stringify(r)}`);
            if (claim[0] === "carried") assert.notEqual(seen(r), seen(plain), `${label} reaches the provider`);
            else assert.equal(seen(r), seen(plain), `${label} changes nothing`);
          }
        }
      });
    }
  }
}
