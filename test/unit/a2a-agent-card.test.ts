// The agent card rewrite of GwBackend a2a (src/a2a/agent-card.ts) on the shapes the e2e test does not send: an A2A 0.3
// card (`url`, `additionalInterfaces`), URLs that are not http(s) or not absolute, the Gateway's origin from
// x-forwarded-proto and :authority, and which paths are cards.

import assert from "node:assert/strict";
import { test } from "node:test";
import { gatewayOrigin, isAgentCardPath, rewriteAgentCard } from "../../src/a2a/agent-card.js";

const GW = "https://gw.example.com:8443";

test("an A2A 0.3 card: url and additionalInterfaces on the Gateway's origin, paths and queries kept", () => {
  const card = {
    name: "a",
    url: "http://10.0.0.7:9999/a2a/v1?x=1",
    preferredTransport: "JSONRPC",
    additionalInterfaces: [
      { url: "http://10.0.0.7:9999/a2a/rest", transport: "HTTP+JSON" },
      { url: "grpc://10.0.0.7:9000", transport: "GRPC" },
    ],
    provider: { organization: "o", url: "https://agents.example.org" },
    documentationUrl: "https://docs.example.org/a",
  };
  assert.deepEqual(rewriteAgentCard(card, GW), {
    ...card,
    url: `${GW}/a2a/v1?x=1`,
    additionalInterfaces: [
      { url: `${GW}/a2a/rest`, transport: "HTTP+JSON" },
      // Not an HTTP URL: the Gateway does not serve it, so it is left as written.
      { url: "grpc://10.0.0.7:9000", transport: "GRPC" },
    ],
  });
});

test("an A2A 1.0 card: every supportedInterfaces url; a relative or malformed one left as written", () => {
  const card = {
    supportedInterfaces: [
      { url: "https://agent.internal/rpc", protocolBinding: "JSONRPC", protocolVersion: "1.0" },
      { url: "/relative", protocolBinding: "HTTP+JSON" },
      { protocolBinding: "GRPC" },
    ],
  };
  assert.deepEqual(rewriteAgentCard(card, GW), {
    supportedInterfaces: [
      { url: `${GW}/rpc`, protocolBinding: "JSONRPC", protocolVersion: "1.0" },
      { url: "/relative", protocolBinding: "HTTP+JSON" },
      { protocolBinding: "GRPC" },
    ],
  });
  assert.equal(rewriteAgentCard("not a card", GW), "not a card");
});

test("the Gateway's origin: x-forwarded-proto (first value) over :scheme, and the client's :authority", () => {
  assert.equal(gatewayOrigin({ ":authority": "gw:8080", ":scheme": "http" }), "http://gw:8080");
  assert.equal(
    gatewayOrigin({ ":authority": "gw", ":scheme": "http", "x-forwarded-proto": "https, http" }),
    "https://gw",
  );
  assert.equal(gatewayOrigin({ host: "h.example" }), "http://h.example");
  assert.equal(gatewayOrigin({ ":scheme": "https" }), undefined);
});

test("card paths: the well-known names at the root or under a route prefix, with or without a query", () => {
  for (const p of [
    "/.well-known/agent-card.json",
    "/agents/a/.well-known/agent-card.json?v=1",
    "/.well-known/agent.json",
  ])
    assert.ok(isAgentCardPath(p), p);
  for (const p of ["/a2a/jsonrpc", "/.well-known/agent-card.json/x", "/x?next=/.well-known/agent-card.json"])
    assert.ok(!isAgentCardPath(p), p);
});
