// examples/llm-failover, examples/prompt-guards and examples/token-budgets run as their READMEs say: `sluice run -f`
// on the directory, fake providers (the real wire formats, checking the key each provider's Secret holds) on the
// example's provider ports, and every curl line of the README through the Envoy sluice started.

import assert from "node:assert/strict";
import { test } from "node:test";
import OpenAI from "openai";
import { startFakeProvider } from "../helpers/fake-providers.js";
import { freePort } from "../helpers/net.js";
import { runExample, runReadme } from "./examples-run.js";

test("examples/llm-failover: the primary answers, then the backup once the primary is gone; the SDK snippet works", async (t) => {
  const primary = await startFakeProvider({ name: "primary", apiKey: "sk-primary-example" });
  const backup = await startFakeProvider({ name: "backup", apiKey: "sk-backup-example" });
  t.after(async () => {
    await primary.close().catch(() => {});
    await backup.close();
  });
  const ports = new Map([
    [8080, await freePort()],
    [8091, primary.port],
    [8092, backup.port],
  ]);
  const running = await runExample("llm-failover", ports);
  t.after(() => running.stop());
  const gateway = `http://127.0.0.1:${ports.get(8080)}/v1`;
  // The README's SDK snippet, before the primary goes away.
  const client = new OpenAI({ baseURL: gateway, apiKey: "unused-the-gateway-holds-the-keys", maxRetries: 0 });
  const calls = await runReadme("llm-failover", running, ports, {
    "the primary provider goes away": async () => {
      const r = await client.chat.completions.create({
        model: "gpt-4o",
        messages: [{ role: "user", content: "hello" }],
      });
      assert.equal(r.choices[0]?.message.content, "Hello from primary: hello");
      await primary.close();
    },
  });
  assert.equal(calls, 3);
  // The backup got the request in its own API (Messages), with its own key, and the model the GwBackend names.
  const last = backup.requests.at(-1);
  assert.equal(last?.path, "/v1/messages");
  assert.equal(last?.headers["x-api-key"], "sk-backup-example");
  assert.equal(last?.json?.["model"], "claude-backup");
  assert.ok(primary.requests.every((r) => r.headers["authorization"] === "Bearer sk-primary-example"));
});

test("examples/prompt-guards: masked before the provider, a card number rejected, a non-card number passed", async (t) => {
  const provider = await startFakeProvider({ name: "provider", apiKey: "sk-guarded-example" });
  t.after(() => provider.close());
  const ports = new Map([
    [8080, await freePort()],
    [8091, provider.port],
  ]);
  const running = await runExample("prompt-guards", ports);
  t.after(() => running.stop());
  assert.equal(await runReadme("prompt-guards", running, ports), 3);
  const seen = provider.requests.map((r) => r.body).join("\n");
  assert.doesNotMatch(seen, /ana@example\.com/);
  assert.doesNotMatch(seen, /4111 1111 1111 1111/);
  assert.match(seen, /write to <EMAIL>/);
});

test("examples/token-budgets: two calls spend the budget, the third gets 429, another rule is not limited", async (t) => {
  const provider = await startFakeProvider({ name: "provider", apiKey: "sk-budget-example" });
  t.after(() => provider.close());
  const ports = new Map([
    [8080, await freePort()],
    [8091, provider.port],
  ]);
  const running = await runExample("token-budgets", ports);
  t.after(() => running.stop());
  assert.equal(await runReadme("token-budgets", running, ports), 4);
  // The refused call never reached the provider.
  assert.ok(!provider.requests.some((r) => r.body.includes('"three"')));
});
