// A remote guard's `tls.keyExchangeGroups`: the guard's pool (src/extproc/llm/guards/remote/http.ts) offers those
// groups alone. A real TLS server that accepts P-384 only: a pool offering P-256 fails the handshake, one offering
// P-384 is answered, and one with no groups (Node's defaults, which include P-384) too.

import assert from "node:assert/strict";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { after, before, test } from "node:test";
import { request } from "undici";
import type { GuardConnection } from "../../src/extproc/llm/guards/remote/config.js";
import { dispatcherFor, sharedDispatcher } from "../../src/extproc/llm/guards/remote/http.js";
import { tlsFixture } from "../helpers/tls.js";

let server: Server;
let url: string;

before(async () => {
  server = createServer(
    { cert: tlsFixture("example.com.crt"), key: tlsFixture("example.com.key"), ecdhCurve: "P-384" },
    (_req, res) => res.end("ok"),
  );
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  url = `https://127.0.0.1:${(server.address() as AddressInfo).port}/guard`;
});

after(() => server.close());

const tls = (curves?: readonly string[]): GuardConnection => ({
  tls: { ca: tlsFixture("example.com.crt"), sni: "example.com", ...(curves !== undefined ? { curves } : {}) },
});

async function call(c: GuardConnection): Promise<string> {
  const answer = await request(url, { dispatcher: dispatcherFor(c, sharedDispatcher()) });
  return answer.body.text();
}

test("the groups the policy names are the only ones offered", async () => {
  assert.equal(await call(tls(["P-384"])), "ok");
  assert.equal(await call(tls(["X25519", "P-384"])), "ok");
  await assert.rejects(call(tls(["P-256"])), /handshake failure|SSL alert number 40/i);
  assert.equal(await call(tls()), "ok");
});
