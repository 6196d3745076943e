// A GwPolicy's extAuth for one AI provider: the translator puts it on that provider's LLM table entry only (its
// service's endpoints resolved, problems named on the policy, no NotYetSupported note any more); the LLM ext_proc's
// pure parts (the CheckRequest it sends, the decision it reads, the headers it applies, the client's denial), and the
// check against a real HTTP authorization service (a decision cache, forwardBody's limit, the failure modes).

import assert from "node:assert/strict";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import { create, toBinary } from "@bufbuild/protobuf";
import { requestVariable, withExtauthz } from "../../src/extproc/llm/cel.js";
import {
  checkRequestOf,
  decisionOf,
  denialReply,
  endpointOf,
  ProviderExtAuths,
  sourceVariable,
  withAllowedHeaders,
} from "../../src/extproc/llm/provider-ext-auth.js";
import { CheckResponseSchema } from "../../src/gen/envoy/service/auth/v3/external_auth_pb.js";
import { makeInput } from "../../src/translate/input.js";
import type { ProviderExtAuthConfig } from "../../src/translate/llm/provider-ext-auth.js";
import type { LlmProviderEntry } from "../../src/translate/llm/table.js";
import { translate } from "../../src/translate/translate.js";

type Doc = Record<string, unknown>;

const docs = (extAuth: Doc, extra: Doc[] = []): Doc[] => [
  {
    apiVersion: "gateway.networking.k8s.io/v1",
    kind: "Gateway",
    metadata: { name: "gw", namespace: "default" },
    spec: { gatewayClassName: "sluice", listeners: [{ name: "http", port: 8080, protocol: "HTTP" }] },
  },
  {
    apiVersion: "v1",
    kind: "Service",
    metadata: { name: "authz", namespace: "default" },
    spec: { ports: [{ name: "p", port: 80 }] },
  },
  {
    apiVersion: "discovery.k8s.io/v1",
    kind: "EndpointSlice",
    metadata: { name: "authz-1", namespace: "default", labels: { "kubernetes.io/service-name": "authz" } },
    addressType: "IPv4",
    ports: [{ name: "p", port: 9100 }],
    endpoints: [{ addresses: ["127.0.0.1"] }],
  },
  {
    apiVersion: "sluice.dev/v1alpha1",
    kind: "GwBackend",
    metadata: { name: "llm", namespace: "default" },
    spec: {
      ai: {
        groups: [
          { providers: [{ name: "guarded", providerA: {}, host: "127.0.0.1", port: 9001 }] },
          { providers: [{ name: "open", providerD: {}, host: "127.0.0.1", port: 9002 }] },
        ],
      },
    },
  },
  {
    apiVersion: "gateway.networking.k8s.io/v1",
    kind: "HTTPRoute",
    metadata: { name: "r", namespace: "default" },
    spec: {
      parentRefs: [{ name: "gw" }],
      rules: [{ backendRefs: [{ group: "sluice.dev", kind: "GwBackend", name: "llm" }] }],
    },
  },
  {
    apiVersion: "sluice.dev/v1alpha1",
    kind: "GwPolicy",
    metadata: { name: "p", namespace: "default" },
    spec: {
      targetRefs: [{ group: "sluice.dev", kind: "GwBackend", name: "llm", sectionName: "guarded" }],
      backend: { extAuth },
    },
  },
  ...extra,
];

function run(d: Doc[]) {
  const r = translate(makeInput(d as never), { impliedGatewayClass: true });
  const providers = new Map<string, LlmProviderEntry>();
  for (const e of r.llm.entries.values()) {
    for (const b of Object.values(e.backends)) for (const p of Object.values(b.providers)) providers.set(p.name, p);
  }
  const status = JSON.stringify(r.statuses.filter((s) => s.kind === "GwPolicy"));
  return { providers, status };
}

describe("translation", () => {
  test("the targeted provider's entry alone carries the extAuth, its service's endpoints resolved; nothing reported", () => {
    const { providers, status } = run(
      docs({ backendRef: { name: "authz", port: 80 }, grpc: { contextExtensions: { tenant: "acme" } } }),
    );
    const ea = providers.get("guarded")?.extAuth;
    assert.equal(ea?.protocol, "grpc");
    assert.deepEqual(ea?.targets, [{ host: "127.0.0.1", port: 9100 }]);
    assert.deepEqual(ea?.contextExtensions, { tenant: "acme" });
    assert.equal(ea?.failureMode, "FailClosed");
    // Within the 5 s Envoy gives the LLM stage per message: the failure mode, not Envoy's timeout, decides.
    assert.equal(ea?.timeoutMs, 3000);
    assert.equal(ea?.policy, "GwPolicy default/p");
    assert.equal(providers.get("open")?.extAuth, undefined);
    assert.doesNotMatch(status, /NotYetSupported|Warning/);
  });

  test("a backendRef that does not resolve is named in the policy's status; the entry has no endpoints", () => {
    const { providers, status } = run(docs({ backendRef: { name: "nowhere", port: 80 } }));
    assert.deepEqual(providers.get("guarded")?.extAuth?.targets, []);
    assert.match(status, /backend\.extAuth\.backendRef: [^"]*nowhere[^"]*checks of attempts to provider guarded fail/);
  });

  test("HTTP options, a cache, forwardBody, CEL reading `source`, responseMetadata: all served, nothing reported", () => {
    const { providers, status } = run(
      docs({
        backendRef: { name: "authz", port: 80 },
        failureMode: "FailOpen",
        http: {
          path: "'/check/' + request.headers['x-team']",
          allowedRequestHeaders: ["x-team"],
          allowedResponseHeaders: ["x-user"],
          addRequestHeaders: { "x-peer": "source.address" },
          responseMetadata: { user: "response.headers['x-user']" },
        },
        forwardBody: { maxSize: "1Ki" },
        cache: { key: ["request.headers['x-team']"], ttl: "30s" },
      }),
    );
    const ea = providers.get("guarded")?.extAuth;
    assert.equal(ea?.protocol, "http");
    assert.equal(ea?.failureMode, "FailOpen");
    assert.equal(ea?.forwardBody, 1024);
    assert.deepEqual(ea?.cache, { key: ["request.headers['x-team']"], ttl: "30s", maxEntries: 10000 });
    assert.deepEqual(ea?.http?.allowedUpstreamHeaders, ["x-user"]);
    assert.equal(ea?.expressions?.path, "'/check/' + request.headers['x-team']");
    assert.deepEqual(ea?.expressions?.responseMetadata, { user: "response.headers['x-user']" });
    assert.doesNotMatch(status, /NotYetSupported|Warning|NeverMatches|Ignored/);
  });

  test("pass-through and Realtime route types: forwardBody, source and identity CEL served, through the relay too", () => {
    const realtime = (d: Doc[]) =>
      d.map((x) =>
        x.kind === "GwBackend"
          ? {
              ...x,
              spec: {
                ...(x.spec as Doc),
                policies: {
                  ai: {
                    routes: {
                      "/v1/realtime": "Realtime",
                      "/v1/files": "Passthrough",
                      "/v1/chat/completions": "Completions",
                    },
                    promptGuard: { request: [{ regex: { action: "Reject", matches: ["secret"] } }] },
                  },
                },
              },
            }
          : x,
      );
    const { providers, status } = run(
      realtime(
        docs({
          backendRef: { name: "authz", port: 80 },
          forwardBody: { maxSize: "1Ki" },
          grpc: { requestMetadata: { "x-user": "jwt.sub", "x-peer": "string(source.address)" } },
        }),
      ),
    );
    assert.equal(providers.get("guarded")?.extAuth?.forwardBody, 1024);
    assert.doesNotMatch(status, /forwardBody|501|not checked/);
    // The relay is sent the client's address and the route's identity: nothing reported.
    assert.doesNotMatch(status, /reads (source|jwt)|NotYetSupported|NeverMatches|Warning/);
  });

  test("the scope ignores the endpoints (decisions survive an endpoint change), not the options", () => {
    const a = run(docs({ backendRef: { name: "authz", port: 80 } })).providers.get("guarded")?.extAuth;
    const moved = docs({ backendRef: { name: "authz", port: 80 } }).map((d) =>
      d.kind === "EndpointSlice" ? { ...d, endpoints: [{ addresses: ["127.0.0.2"] }] } : d,
    );
    const b = run(moved).providers.get("guarded")?.extAuth;
    const c = run(docs({ backendRef: { name: "authz", port: 80 }, failureMode: "FailOpen" })).providers.get(
      "guarded",
    )?.extAuth;
    assert.notDeepEqual(a?.targets, b?.targets);
    assert.equal(a?.scope, b?.scope);
    assert.notEqual(a?.scope, c?.scope);
  });
});

describe("the check's pure parts", () => {
  test("the CheckRequest: the client's headers, method, path, host; the body only when given", () => {
    const headers = {
      ":method": "POST",
      ":path": "/v1/chat/completions",
      ":authority": "gw",
      authorization: "Bearer c",
    };
    const r = checkRequestOf({ headers, activation: {} }, undefined);
    const http = r.attributes?.request?.http;
    assert.equal(http?.method, "POST");
    assert.equal(http?.path, "/v1/chat/completions");
    assert.equal(http?.host, "gw");
    assert.equal(http?.headers["authorization"], "Bearer c");
    assert.equal(http?.size, -1n);
    assert.equal(http?.rawBody.byteLength, 0);
    const body = new TextEncoder().encode('{"model":"m"}');
    const withBody = checkRequestOf({ headers, activation: {} }, body).attributes?.request?.http;
    assert.equal(withBody?.size, BigInt(body.byteLength));
    assert.deepEqual(withBody?.rawBody, body);
  });

  test("the CheckRequest's source and destination: the client's connection, as a route's check has them", () => {
    const peer = { source: endpointOf("10.1.2.3:5555", 5555), destination: endpointOf("[::1]:8080", undefined) };
    assert.deepEqual(peer, {
      source: { address: "10.1.2.3", port: 5555 },
      destination: { address: "::1", port: 8080 },
    });
    const r = checkRequestOf(
      {
        headers: { ":path": "/" },
        activation: {},
        peer: { source: { address: "10.1.2.3", port: 5555 }, destination: { address: "::1", port: 8080 } },
      },
      undefined,
    );
    const src = r.attributes?.source?.address?.address;
    assert.equal(src?.case, "socketAddress");
    assert.equal(src?.case === "socketAddress" ? src.value.address : "", "10.1.2.3");
    assert.deepEqual(src?.case === "socketAddress" ? src.value.portSpecifier : undefined, {
      case: "portValue",
      value: 5555,
    });
    const dst = r.attributes?.destination?.address?.address;
    assert.equal(dst?.case === "socketAddress" ? dst.value.address : "", "::1");
    // Unknown (no attributes): left out, as Envoy leaves out what it does not have.
    assert.equal(checkRequestOf({ headers: {}, activation: {} }, undefined).attributes?.source, undefined);
    assert.equal(endpointOf(undefined, 1), undefined);
    // CEL's `source`: an IP value and the port.
    const v = sourceVariable({ source: { address: "10.1.2.3", port: 5555 } });
    assert.equal(v?.["port"], 5555n);
    assert.equal(sourceVariable({}), undefined);
  });

  test("an allow's metadata is what later steps read as extauthz, over the route's", () => {
    const ok = decisionOf(
      toBinary(
        CheckResponseSchema,
        create(CheckResponseSchema, {
          httpResponse: { case: "okResponse", value: {} },
          dynamicMetadata: { sluice_extauthz: { tier: "gold" } },
        }),
      ),
    );
    assert.deepEqual(ok, { allow: { set: {}, remove: [], metadata: { tier: "gold" } } });
    const merged = withExtauthz(
      {
        jwt: 1,
        extauthz: new Map([
          ["tier", "basic"],
          ["team", "a"],
        ]),
      },
      { tier: "gold" },
    );
    assert.equal(merged["jwt"], 1);
    assert.deepEqual(
      [...(merged["extauthz"] as Map<string, unknown>)],
      [
        ["tier", "gold"],
        ["team", "a"],
      ],
    );
    assert.deepEqual([...(withExtauthz({}, { tier: "gold" })["extauthz"] as Map<string, unknown>)], [["tier", "gold"]]);
  });

  test("decisions: an allow's headers (overwritten, or appended), a denial's status, headers and body; 403 by default", () => {
    const ok = decisionOf(
      toBinary(
        CheckResponseSchema,
        create(CheckResponseSchema, {
          httpResponse: {
            case: "okResponse",
            value: {
              headers: [
                { header: { key: "X-User", value: "ada" } },
                { header: { key: "x-role", value: "a" } },
                { header: { key: "x-role", value: "b" }, append: true },
              ],
              headersToRemove: ["X-Drop"],
            },
          },
        }),
      ),
    );
    assert.deepEqual(ok, { allow: { set: { "x-user": "ada", "x-role": "a,b" }, remove: ["x-drop"] } });
    const denied = decisionOf(
      toBinary(
        CheckResponseSchema,
        create(CheckResponseSchema, {
          status: { code: 7, message: "internal detail" },
          httpResponse: {
            case: "deniedResponse",
            value: {
              status: { code: 401 },
              headers: [
                { header: { key: "www-authenticate", value: "Bearer" } },
                { header: { key: "content-type", value: "text/plain" } },
              ],
              body: "who are you",
            },
          },
        }),
      ),
    );
    assert.deepEqual(denied, { deny: { status: 401, headers: [["www-authenticate", "Bearer"]], body: "who are you" } });
    const bare = decisionOf(toBinary(CheckResponseSchema, create(CheckResponseSchema, { status: { code: 7 } })));
    assert.deepEqual(bare, { deny: { status: 403, headers: [], body: "" } });
  });

  test("allowed headers never replace the provider work's own nor a client credential header; both lists kept", () => {
    const w = { set: { ":authority": "api", authorization: "Bearer sk-provider" }, remove: ["x-api-key", "x-old"] };
    const { work, written } = withAllowedHeaders(
      w,
      {
        set: { authorization: "Bearer evil", ":path": "/x", "x-user": "ada", "x-old": "kept", "content-length": "1" },
        remove: ["api-key", "x-gone", "transfer-encoding", "x-sluice-llm-id"],
      },
      ["authorization", "x-api-key", "api-key", "x-sluice-llm-id"],
    );
    assert.deepEqual(work.set, {
      ":authority": "api",
      authorization: "Bearer sk-provider",
      "x-user": "ada",
      "x-old": "kept",
    });
    assert.deepEqual(work.remove, ["x-api-key", "x-gone"]);
    assert.deepEqual(written.sort(), ["x-old", "x-user"]);
  });

  test("the client's denial: its format's error shape, the service's body as the message, its headers", () => {
    const d = { status: 403, headers: [["www-authenticate", "Bearer"]] as const, body: "premium only" };
    const openai = denialReply("chat-completions", "guarded", { ...d, headers: [...d.headers] });
    assert.equal(openai.status, 403);
    assert.deepEqual(openai.headers.add, [["www-authenticate", "Bearer"]]);
    const e = JSON.parse(openai.body) as { error: { message: string; type: string } };
    assert.equal(e.error.message, "premium only");
    assert.equal(e.error.type, "permission_error");
    const anthropic = JSON.parse(denialReply("messages", "guarded", { ...d, headers: [] }).body) as {
      type: string;
      error: { type: string };
    };
    assert.equal(anthropic.type, "error");
    assert.equal(anthropic.error.type, "permission_error");
    // Forwarded as it is (no LLM format): the service's own body.
    const raw = denialReply(undefined, "guarded", { ...d, headers: [] });
    assert.equal(raw.body, "premium only");
    // No body: says which provider, and why when Sluice denied.
    const failed = denialReply("chat-completions", "guarded", {
      status: 403,
      headers: [],
      body: "",
      why: "authorization service failed",
    });
    assert.match(
      failed.body,
      /access to provider guarded denied by its authorization service \(authorization service failed\)/,
    );
  });
});

describe("checks against a real HTTP authorization service", () => {
  let server: Server;
  let port = 0;
  const seen: { headers: IncomingHttpHeaders; body: string }[] = [];
  const auths = new ProviderExtAuths(() => {});

  before(async () => {
    server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        seen.push({ headers: req.headers, body: Buffer.concat(chunks).toString() });
        if (req.headers["x-allow"] === "slow") {
          setTimeout(() => {
            res.writeHead(200);
            res.end();
          }, 300);
        } else if (req.headers["x-allow"] === "yes") {
          res.writeHead(200, { "x-user": "ada" });
          res.end();
        } else {
          res.writeHead(403);
          res.end("no");
        }
      });
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    port = (server.address() as AddressInfo).port;
  });
  after(() => {
    auths.close();
    server.close();
  });

  const config = (more: Partial<ProviderExtAuthConfig> = {}): ProviderExtAuthConfig => ({
    service: "Service default/authz port 80",
    protocol: "http",
    targets: [{ host: "127.0.0.1", port }],
    authority: "authz",
    contextExtensions: {},
    timeoutMs: 2000,
    failureMode: "FailClosed",
    http: { allowedRequestHeaders: ["x-allow"], headersToAdd: [], allowedUpstreamHeaders: ["x-user"] },
    scope: `s-${JSON.stringify(more)}`,
    policy: "GwPolicy default/p",
    ...more,
  });
  const request = (allow: string, body?: string) => {
    const headers = { ":method": "POST", ":path": "/v1/chat/completions", ":authority": "gw", "x-allow": allow };
    return {
      headers,
      activation: { request: requestVariable(headers) },
      ...(body !== undefined ? { body: new TextEncoder().encode(body) } : {}),
    };
  };

  test("allowed with the service's header, denied with its status and body", async () => {
    assert.deepEqual(await auths.check(config(), request("yes")), { allow: { set: { "x-user": "ada" }, remove: [] } });
    const d = await auths.check(config(), request("no"));
    assert.ok("deny" in d);
    assert.equal(d.deny.status, 403);
    assert.equal(d.deny.body, "no");
  });

  test("responseMetadata (CEL over the answer) comes back with the allow; `source` reaches the call's CEL", async () => {
    const cfg = config({
      expressions: {
        responseMetadata: { user: "response.headers['x-user']" },
        headers: { "x-peer": "string(source.address) + ':' + string(source.port)" },
      },
    });
    const req = request("yes");
    const d = await auths.check(cfg, {
      ...req,
      activation: { ...req.activation, source: sourceVariable({ source: { address: "10.9.8.7", port: 4242 } }) },
    });
    assert.deepEqual(d, { allow: { set: { "x-user": "ada" }, remove: [], metadata: { user: "ada" } } });
    assert.equal(seen.at(-1)?.headers["x-peer"], "10.9.8.7:4242");
  });

  test("a cache: one call per key while its ttl lasts", async () => {
    const cfg = config({ cache: { key: ["request.headers['x-allow']"], ttl: "60s", maxEntries: 10 } });
    const n = seen.length;
    for (let i = 0; i < 3; i++) assert.ok("allow" in (await auths.check(cfg, request("yes"))));
    assert.equal(seen.length, n + 1);
  });

  test("forwardBody: the client's body is sent; a larger one is refused with 413, the service not called", async () => {
    const cfg = config({ forwardBody: 16 });
    await auths.check(cfg, request("yes", '{"a":1}'));
    assert.equal(seen.at(-1)?.body, '{"a":1}');
    const n = seen.length;
    const d = await auths.check(cfg, request("yes", "x".repeat(17)));
    assert.ok("deny" in d);
    assert.equal(d.deny.status, 413);
    assert.equal(seen.length, n);
  });

  test("a service slower than the deadline fails: the failure mode applies", async () => {
    const d = await auths.check(config({ timeoutMs: 50 }), request("slow"));
    assert.ok("deny" in d);
    assert.equal(d.deny.why, "authorization service failed");
    const open = await auths.check(config({ timeoutMs: 50, failureMode: "FailOpen" }), request("slow"));
    assert.ok("allow" in open);
  });

  test("the service unreachable: FailClosed denies, FailOpen allows", async () => {
    const down = { targets: [{ host: "127.0.0.1", port: 1 }] };
    const closed = await auths.check(config(down), request("yes"));
    assert.ok("deny" in closed);
    assert.equal(closed.deny.why, "authorization service failed");
    const open = await auths.check(config({ ...down, failureMode: "FailOpen" }), request("yes"));
    assert.deepEqual(open, { allow: { set: {}, remove: [] } });
  });
});
