// Values Sluice computes per request with the spec's CEL for filters Envoy runs after it (src/extproc/context.ts),
// end to end through a real Envoy:
// - `extProc.metadataContext`: the user's processor receives each namespace and key, evaluated per request, in
//   ProcessingRequest.metadata_context;
// - `extProc.requestAttributes` under the policy's names with the spec's values (source.address, request.query),
//   and an attribute path with the response;
// - the `conditional` extProc: only the chosen entry's processor runs, with its own values;
// - `rateLimit.global` descriptor entries Envoy's CEL cannot read (`source.address` as an IP, `request.query` as a
//   map, `apiKey`) reach the rate limit service with the spec's values, and a Requests `cost` computed per request
//   is the hits added (1 when it fails);
// - `jwtAuthentication.location.expression` chooses where the token is read (a header or a query parameter), and a
//   client cannot smuggle a token in the header Sluice uses.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { create, type JsonObject } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import {
  ExternalProcessor,
  type ProcessingRequest,
  ProcessingResponseSchema,
} from "../../src/gen/envoy/service/ext_proc/v3/external_processor_pb.js";
import { addGrpcService } from "../../src/grpc/service.js";
import { localService, rulePolicy, startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { type GrpcTestServer, startRateLimitService } from "../helpers/grpc-services.js";
import { type EchoBody, request, startEchoUpstream, type Upstream } from "../helpers/net.js";

const H2 = "kubernetes.io/h2c";
const ISS = "https://issuer.test";

type Seen = Record<string, JsonObject>;

/**
 * A processor that records, for each request, the metadata context of its headers and the attributes sent with its
 * headers and its response headers, and lets both through.
 */
async function startRecordingProcessor(): Promise<
  GrpcTestServer & { readonly seen: Seen[]; readonly attributes: { request: Seen; response: Seen }[] }
> {
  const seen: Seen[] = [];
  const attributes: { request: Seen; response: Seen }[] = [];
  const plain = (m: Record<string, unknown>): Seen => JSON.parse(JSON.stringify(m)) as Seen;
  const server = new grpc.Server();
  addGrpcService(server, ExternalProcessor, {
    process(call) {
      call.on("data", (req: ProcessingRequest) => {
        if (req.request.case === "responseHeaders") {
          const last = attributes.at(-1);
          if (last !== undefined) last.response = plain(req.attributes);
          call.write(create(ProcessingResponseSchema, { response: { case: "responseHeaders", value: {} } }));
          return;
        }
        if (req.request.case !== "requestHeaders") return;
        attributes.push({ request: plain(req.attributes), response: {} });
        const md: Record<string, JsonObject> = {};
        for (const [ns, s] of Object.entries(req.metadataContext?.filterMetadata ?? {})) {
          md[ns] = JSON.parse(JSON.stringify(s)) as JsonObject;
        }
        seen.push(md);
        call.write(create(ProcessingResponseSchema, { response: { case: "requestHeaders", value: {} } }));
      });
      call.on("end", () => call.end());
      call.on("error", () => undefined);
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
  );
  return { port, seen, attributes, close: () => new Promise<void>((r) => server.tryShutdown(() => r())) };
}

function rule(name: string): string {
  return `    - name: ${name}
      matches: [{ path: { type: PathPrefix, value: /${name} } }]
      backendRefs: [{ name: app, port: 80 }]`;
}

describe("values Sluice computes for later filters, through Envoy", () => {
  let gw: TestGateway;
  let up: Upstream;
  let proc: Awaited<ReturnType<typeof startRecordingProcessor>>;
  let proc2: Awaited<ReturnType<typeof startRecordingProcessor>>;
  let rls: Awaited<ReturnType<typeof startRateLimitService>>;
  let key: Awaited<ReturnType<typeof generateKeyPair>>;

  const token = (sub: string) =>
    new SignJWT({ sub })
      .setProtectedHeader({ alg: "RS256", kid: "k1" })
      .setIssuer(ISS)
      .setAudience("api")
      .setIssuedAt()
      .setExpirationTime("10m")
      .sign(key.privateKey);

  before(async () => {
    key = await generateKeyPair("RS256", { extractable: true });
    const jwks = JSON.stringify({ keys: [{ ...(await exportJWK(key.publicKey)), kid: "k1", alg: "RS256" }] });
    up = await startEchoUpstream("app");
    proc = await startRecordingProcessor();
    proc2 = await startRecordingProcessor();
    rls = await startRateLimitService(1000);
    gw = await startTestGateway(
      () => `${localService("app", up.port)}${localService("proc", proc.port, H2)}${localService("proc2", proc2.port, H2)}${localService("rls", rls.port, H2)}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
${["meta", "attrs", "cond", "nofallback", "limited", "keyed", "jwt", "xsource", "open"].map(rule).join("\n")}
${rulePolicy(
  "meta",
  `extProc:
  backendRef: { name: proc, port: 80 }
  processingOptions: { requestBodyMode: None, responseHeaderMode: Skip, responseBodyMode: None, requestTrailerMode: Skip, responseTrailerMode: Skip }
  metadataContext:
    acme.context:
      user: "request.headers['x-user']"
      path: request.path
      client: source.address
      tags: "request.query['tag'].split(',')"
      missing: "request.headers['x-absent']"
    acme.other:
      method: request.method`,
)}${rulePolicy(
  "attrs",
  `extProc:
  backendRef: { name: proc, port: 80 }
  processingOptions: { requestBodyMode: None, responseHeaderMode: Send, responseBodyMode: None, requestTrailerMode: Skip, responseTrailerMode: Skip }
  requestAttributes:
    user: "request.headers['x-user']"
    client: source.address
    page: "request.query['page']"
    path: request.path
    query: request.query
  responseAttributes:
    response.code: response.code
    status: response.code
    upstream: "response.headers['x-upstream']"
    who: "request.headers['x-user']"
    peer: source.address
    page: "request.query['page']"
    text: "string(response.code)"
    joined: "response.headers['x-upstream'].upperAscii() + '/' + string(response.code)"
    query: request.query
    headers: response.headers`,
)}${rulePolicy(
  "cond",
  `extProc:
  conditional:
    - condition: "request.headers['x-tier'] == 'gold'"
      policy:
        backendRef: { name: proc, port: 80 }
        processingOptions: { requestBodyMode: None, responseHeaderMode: Send, responseBodyMode: None, requestTrailerMode: Skip, responseTrailerMode: Skip }
        metadataContext: { acme.cond: { lane: "'gold:' + request.headers['x-user']" } }
        responseAttributes: { lane: "'gold/' + string(response.code)" }
    - policy:
        backendRef: { name: proc2, port: 80 }
        processingOptions: { requestBodyMode: None, responseHeaderMode: Skip, responseBodyMode: None, requestTrailerMode: Skip, responseTrailerMode: Skip }
        metadataContext: { acme.cond: { lane: "'rest'" } }`,
)}${rulePolicy(
  "nofallback",
  `extProc:
  conditional:
    - condition: "request.headers['x-tier'] == 'gold'"
      policy:
        backendRef: { name: proc2, port: 80 }
        processingOptions: { requestBodyMode: None, responseHeaderMode: Skip, responseBodyMode: None, requestTrailerMode: Skip, responseTrailerMode: Skip }`,
)}${rulePolicy(
  "limited",
  `rateLimit:
  global:
    backendRef: { name: rls, port: 80 }
    domain: ctx
    descriptors:
      - entries: [{ name: client, expression: source.address }, { name: tier, expression: "request.query['tier']" }]
        cost: "int(request.headers['x-cost'])"`,
)}${rulePolicy(
  "xsource",
  `transformation: { request: { set: [{ name: x-client, value: "string(source.port) + ' ' + (source.address == ip('127.0.0.1') ? 'loopback' : 'other')" }] } }`,
)}${rulePolicy(
  "keyed",
  `apiKeyAuthentication: { secretRef: { name: keys } }
rateLimit:
  global:
    backendRef: { name: rls, port: 80 }
    domain: keyed
    descriptors: [{ entries: [{ name: group, expression: apiKey.group }] }]`,
)}---
apiVersion: v1
kind: Secret
metadata: { name: keys, namespace: default }
stringData:
  gold: ${JSON.stringify(JSON.stringify({ key: "key-gold-0123456789", metadata: { group: "gold" } }))}
${rulePolicy(
  "jwt",
  `jwtAuthentication:
  providers: [{ issuer: "${ISS}", audiences: [api], jwks: { inline: '${jwks}' } }]
  location:
    expression: "'x-api-token' in request.headers ? request.headers['x-api-token'] : request.query['access']"`,
)}`,
      "/open",
      (s) => s === 200,
    );
  });

  after(async () => {
    await gw?.stop();
    await proc?.close();
    await proc2?.close();
    await rls?.close();
    await up?.close();
  });

  test("metadataContext: the processor gets each value, evaluated on this request, in its namespace", async () => {
    const before = proc.seen.length;
    const r = await request(gw.port, "/meta/a?tag=x,y", { headers: { "x-user": "alice" } });
    assert.equal(r.status, 200);
    const seen = proc.seen.slice(before);
    assert.equal(seen.length, 1);
    assert.deepEqual(seen[0]?.["acme.context"], {
      user: "alice",
      // The spec's path: no query.
      path: "/meta/a",
      client: "127.0.0.1",
      tags: ["x", "y"],
    });
    assert.deepEqual(seen[0]?.["acme.other"], { method: "GET" });
    // A second request gets its own values.
    const r2 = await request(gw.port, "/meta/b?tag=z", { headers: { "x-user": "bob" } });
    assert.equal(r2.status, 200);
    assert.equal(proc.seen.at(-1)?.["acme.context"]?.["user"], "bob");
    assert.deepEqual(proc.seen.at(-1)?.["acme.context"]?.["tags"], ["z"]);
  });

  test("request and response attributes reach the processor under the policy's names, with the spec's values", async () => {
    const before = proc.attributes.length;
    const r = await request(gw.port, "/attrs/x?page=3&q=1", { headers: { "x-user": "dana", "x-tier": "gold" } });
    assert.equal(r.status, 200);
    const seen = proc.attributes.slice(before);
    assert.equal(seen.length, 1);
    assert.deepEqual(seen[0]?.request["envoy.filters.http.ext_proc"], {
      user: "dana",
      client: "127.0.0.1",
      page: "3",
      // The spec's path: without the query.
      path: "/attrs/x",
      // A map: its JSON text (Envoy's attribute conversion would send the text `CelMap value`).
      query: '{"page":"3","q":"1"}',
    });
    // With the response, under the policy's names: what Envoy evaluates then (the response, the request), what
    // Sluice computed on the request (source.address as the spec's IP, a query parameter, the query map), and what
    // Sluice's response stage computed on the response before this processor got it (string conversion and string
    // functions of the response, which Envoy's default CEL lacks; the response headers map).
    const response = { ...seen[0]?.response["envoy.filters.http.ext_proc"] };
    const headers = JSON.parse(String(response["headers"])) as Record<string, string>;
    delete response["headers"];
    assert.deepEqual(response, {
      "response.code": 200,
      status: 200,
      upstream: "app",
      who: "dana",
      peer: "127.0.0.1",
      page: "3",
      text: "200",
      joined: "APP/200",
      query: '{"page":"3","q":"1"}',
    });
    assert.equal(headers["x-upstream"], "app");
    assert.match(headers["content-type"] ?? "", /json/);
    // Each response gets its own values.
    assert.equal((await request(gw.port, "/attrs/y?page=9", { headers: { "x-user": "eve" } })).status, 200);
    const second = proc.attributes.at(-1)?.response["envoy.filters.http.ext_proc"];
    assert.equal(second?.["query"], '{"page":"9"}');
    assert.equal(second?.["who"], "eve");
    assert.equal(second?.["text"], "200");
  });

  test("conditional extProc: the first entry whose condition holds runs, alone, with its own values", async () => {
    const [a, b] = [proc.seen.length, proc2.seen.length];
    const gold = await request(gw.port, "/cond", { headers: { "x-tier": "gold", "x-user": "erin" } });
    assert.equal(gold.status, 200);
    assert.deepEqual(
      proc.seen.slice(a).map((m) => m["acme.cond"]),
      [{ lane: "gold:erin" }],
    );
    // The chosen entry's response attribute, computed by the response stage for that entry.
    assert.deepEqual(proc.attributes.at(-1)?.response["envoy.filters.http.ext_proc"], { lane: "gold/200" });
    assert.equal(proc2.seen.length, b, "the fallback does not run when an earlier entry is chosen");
    // No condition holds: the fallback; a client's own entry header changes nothing.
    const rest = await request(gw.port, "/cond", { headers: { "x-sluice-ext-proc-entry": "0" } });
    assert.equal(rest.status, 200);
    assert.equal((JSON.parse(rest.body) as EchoBody).headers["x-sluice-ext-proc-entry"], undefined, "not upstream");
    assert.equal(proc.seen.length, a + 1);
    assert.deepEqual(
      proc2.seen.slice(b).map((m) => m["acme.cond"]),
      [{ lane: "rest" }],
    );
    // Without a fallback and no condition true, no processor runs and the request goes on.
    assert.equal((await request(gw.port, "/nofallback", { headers: { "x-tier": "silver" } })).status, 200);
    assert.equal(proc2.seen.length, b + 1);
    assert.equal((await request(gw.port, "/nofallback", { headers: { "x-tier": "gold" } })).status, 200);
    assert.equal(proc2.seen.length, b + 2);
  });

  test("rate limit: source.address and request.query entries carry the spec's values; cost per request", async () => {
    const start = rls.calls.length;
    assert.equal((await request(gw.port, "/limited?tier=gold", { headers: { "x-cost": "5" } })).status, 200);
    assert.equal((await request(gw.port, "/limited?tier=silver&x=1")).status, 200);
    const calls = rls.calls.slice(start);
    assert.deepEqual(calls, [
      { key: "ctx|client=127.0.0.1,tier=gold", hits: 5, over: false },
      // No x-cost header: the cost fails and counts 1.
      { key: "ctx|client=127.0.0.1,tier=silver", hits: 1, over: false },
    ]);
    // No `tier` in the query: the entry fails, and as with an Envoy expression that fails the descriptor is not sent.
    assert.equal((await request(gw.port, "/limited")).status, 200);
    assert.equal(rls.calls.length, start + 2);
  });

  test("rate limit: an entry reading apiKey carries the authenticated key's metadata", async () => {
    const start = rls.calls.length;
    const r = await request(gw.port, "/keyed", { headers: { authorization: "Bearer key-gold-0123456789" } });
    assert.equal(r.status, 200);
    assert.deepEqual(rls.calls.slice(start), [{ key: "keyed|group=gold", hits: 1, over: false }]);
    assert.equal((await request(gw.port, "/keyed")).status, 401);
    assert.equal(rls.calls.length, start + 1);
  });

  test("transformation: expressions reading source see the client's address and port", async () => {
    const r = await request(gw.port, "/xsource");
    assert.equal(r.status, 200);
    assert.match(String((JSON.parse(r.body) as EchoBody).headers["x-client"]), /^[1-9]\d* loopback$/);
  });

  test("jwt location.expression: the token is read where the expression says, and only there", async () => {
    const t = await token("carol");
    const viaHeader = await request(gw.port, "/jwt", { headers: { "x-api-token": t } });
    assert.equal(viaHeader.status, 200);
    const echo = JSON.parse(viaHeader.body) as EchoBody;
    // Sluice's own header is removed once the token verifies; the client's stays as received.
    assert.equal(echo.headers["x-sluice-jwt-token"], undefined);
    assert.equal(echo.headers["x-api-token"], t);
    assert.equal((await request(gw.port, `/jwt?access=${t}`)).status, 200);
    assert.equal((await request(gw.port, "/jwt")).status, 401);
    // The usual place is not where this policy reads the token.
    assert.equal((await request(gw.port, "/jwt", { headers: { authorization: `Bearer ${t}` } })).status, 401);
    // Nor can a client set Sluice's header itself.
    assert.equal((await request(gw.port, "/jwt", { headers: { "x-sluice-jwt-token": t } })).status, 401);
    assert.equal((await request(gw.port, "/jwt", { headers: { "x-api-token": "not-a-jwt" } })).status, 401);
  });
});
