// pooledConnectionOpen (src/mcp/target-connection.ts): the spare pool's adoption check skips its TCP probe when a
// kept-alive connection to the target is still open, so it must say false once the target's process is gone.
import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { test } from "node:test";
import { pooledConnectionOpen } from "../../src/mcp/target-connection.js";
import { targetRequest } from "../../src/mcp/target-request.js";
import { waitFor } from "../helpers/net.js";

test("a kept-alive connection to a target counts as open until the target closes it", async () => {
  const server = createServer((_q, s) => s.end("ok"));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const url = new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`);
  assert.equal(pooledConnectionOpen(url, undefined), false, "nothing sent yet");
  const res = await targetRequest(url, undefined, { method: "POST", headers: {}, body: "{}", stream: false });
  res.resume();
  await new Promise((r) => res.once("end", r));
  await waitFor("the socket back in the pool", async () => (pooledConnectionOpen(url, undefined) ? true : undefined));
  const other = new URL(`http://127.0.0.1:${Number(url.port) + 1}/mcp`);
  assert.equal(pooledConnectionOpen(other, undefined), false, "another port has no connection");
  server.closeAllConnections();
  server.close();
  await waitFor("the closed connection dropped", async () => (pooledConnectionOpen(url, undefined) ? undefined : true));
});
