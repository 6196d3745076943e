// The console's LLM usage and MCP targets against a real `sluice run` (examples/llm-failover with fake providers):
// after requests through Envoy with the official openai client, /console/api/state and the page in headless Chromium
// show the route and model with exactly the tokens the provider reported.

import assert from "node:assert/strict";
import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import OpenAI from "openai";
import puppeteer from "puppeteer-core";
import { projectRoot } from "../../src/cli/paths.js";
import { startFakeProvider } from "../helpers/fake-providers.js";
import { freePort, waitFor } from "../helpers/net.js";
import { runExample } from "./examples-run.js";

const CHROMIUM = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].find((p) => existsSync(p));

interface Row {
  gateway: string;
  route: string;
  provider: string;
  model: string;
  requests: number;
  inputTokens: number;
  outputTokens: number;
}

test("LLM usage by route and model in the console equals what the provider reported", async (t) => {
  assert.ok(CHROMIUM, "chromium is not installed: run scripts/setup.d/chromium.sh");
  const primary = await startFakeProvider({ name: "primary" });
  const backup = await startFakeProvider({ name: "backup" });
  t.after(async () => {
    await primary.close();
    await backup.close();
  });
  const ports = new Map([
    [8080, await freePort()],
    [8091, primary.port],
    [8092, backup.port],
  ]);
  const running = await runExample("llm-failover", ports);
  t.after(() => running.stop());
  const client = new OpenAI({ baseURL: `http://127.0.0.1:${ports.get(8080)}/v1`, apiKey: "k", maxRetries: 0 });
  const ask = (text: string) =>
    client.chat.completions.create({ model: "gpt-4o", messages: [{ role: "user", content: text }] });
  const first = await waitFor("the LLM route", async () => ask("one").catch(() => undefined), 45_000);
  const second = await ask("two");
  const reported = [first, second].map((r) => r.usage);
  const input = reported.reduce((n, u) => n + (u?.prompt_tokens ?? 0), 0);
  const output = reported.reduce((n, u) => n + (u?.completion_tokens ?? 0), 0);
  assert.ok(input > 0 && output > 0);

  const base = `http://127.0.0.1:${running.sluice.adminPort}`;
  const rows = await waitFor("the usage in the console", async () => {
    const s = (await (await fetch(`${base}/console/api/state`)).json()) as { usage: { llm: Row[] } };
    const r = s.usage.llm.filter((x) => x.requests > 0);
    return r.length > 0 && r.reduce((n, x) => n + x.requests, 0) >= 2 ? r : undefined;
  });
  assert.equal(rows.length, 1, JSON.stringify(rows));
  const row = rows[0] as Row;
  assert.equal(row.gateway, "default/llm");
  assert.match(row.route, /chat/);
  assert.equal(row.requests, 2);
  assert.equal(row.inputTokens, input);
  assert.equal(row.outputTokens, output);

  const browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
  });
  t.after(() => browser.close());
  const page = await browser.newPage();
  await page.goto(`${base}/console#llm`, { waitUntil: "networkidle0" });
  await page.waitForSelector("body[data-loaded=true]");
  const cells = await page.$eval('[data-testid="llm-row"]', (tr) => [...tr.children].map((td) => td.textContent ?? ""));
  assert.equal(cells[0], `${row.gateway} ${row.route}`);
  assert.equal(cells[1], row.model);
  assert.equal(cells[3], "2");
  assert.equal(cells[5], String(input));
  assert.equal(cells[6], String(output));
  const dir = join(projectRoot(), ".cache", "artifacts", "console");
  mkdirSync(dir, { recursive: true });
  await (await page.$("#llm"))?.screenshot({ path: join(dir, "llm-usage.png") });
});
