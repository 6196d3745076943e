// examples/mcp-gateway runs as its README says: `sluice run -f` on the directory, two MCP servers written with the MCP
// SDK on the example's target ports, the README's curl lines and its SDK snippet through the Envoy sluice started.

import assert from "node:assert/strict";
import { test } from "node:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { startSdkTarget } from "../helpers/mcp-targets.js";
import { freePort } from "../helpers/net.js";
import { runExample, runReadme } from "./examples-run.js";

test("examples/mcp-gateway: the README's calls, then its SDK snippet sees both targets' tools and calls one", async (t) => {
  const weather = await startSdkTarget("weather");
  const tickets = await startSdkTarget("tickets");
  t.after(async () => {
    await weather.kill();
    await tickets.kill();
  });
  const ports = new Map([
    [8080, await freePort()],
    [8093, weather.port],
    [8094, tickets.port],
  ]);
  const running = await runExample("mcp-gateway", ports);
  t.after(() => running.stop());
  assert.equal(await runReadme("mcp-gateway", running, ports), 2);

  // The README's snippet, with the gateway's port.
  const client = new Client({ name: "example", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${ports.get(8080)}/tools/mcp`)));
  t.after(() => client.close());
  const names = (await client.listTools()).tools.map((x) => x.name);
  assert.ok(names.includes("weather_echo") && names.includes("tickets_echo"), names.join(", "));
  const r = (await client.callTool({ name: "weather_echo", arguments: { text: "hi" } })) as {
    content: { type: string; text: string }[];
  };
  assert.equal(r.content[0]?.text, "weather: hi");

  // The console lists both targets, with the calls that reached them.
  const state = (await (await fetch(`http://127.0.0.1:${running.sluice.adminPort}/console/api/state`)).json()) as {
    mcp: { backend: string; target: string }[];
  };
  assert.deepEqual(state.mcp.map((m) => `${m.backend} ${m.target}`).sort(), [
    "default/tools tickets",
    "default/tools weather",
  ]);
});
