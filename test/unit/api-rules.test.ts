// Table-driven rules and limits of both spec documents: for each rule and each limit, at least one valid and one
// invalid document at the boundary; every invalid case asserts the field path and the message. Every case is also
// run through the CRD's CEL rules (x-kubernetes-validations, evaluated with @bufbuild/cel on the defaulted object) to
// prove the CEL and TypeScript forms of each rule agree.
//
// Checklist (Document 1 = policy-api.md, Document 2 = backend-model-api.md):
//  [x] D1 GwPolicy: exactly one of targetRefs/targetSelectors
//  [x] D1 target reference/selector: at most one of sectionName and port
//  [x] D1 port only on frontend policies that target a Gateway
//  [x] D1 strategy only on traffic policies
//  [x] D1 traffic.phase PreRouting only with Gateway/Listener targets
//  [x] D1 frontend only on a Gateway (not Listener, not ListenerSet)
//  [x] D1 traffic and backend target kinds (Gateway/ListenerSet/Route; + Service/GwBackend for backend)
//  [x] D1 conditional lists: either fields or conditional; one entry without condition, and it is last
//  [x] D1 extProc backendRef required unless conditional
//  [x] D1 jwks inline XOR remote
//  [x] D1 API key: exactly one of secretRef, secretSelector, configMapSelector
//  [x] D1 basic: users XOR secretRef; htpasswd lines
//  [x] D1 extraction location exactly one of header/queryParameter/cookie/expression; HTTPHeaderName token chars
//  [x] D1 BackendAuth at most one mechanism; model auth without crossAppAccess/jwtSign
//  [x] D1 jwtSign claims iat/exp/nbf rejected; claims at least one
//  [x] D1 assumeRole sessionName XOR sessionNameExpression; sessionName charset and 2..64; role ARN
//  [x] D1 assume-role tag value XOR expression
//  [x] D1 cloudC at most one option; cloudB audience only with IdToken
//  [x] D1 clientAuth: PrivateKeyJwt needs privateKeyJwt; certificateRef with certificateHeader; no secretRef =>
//      not ClientSecretBasic
//  [x] D1 actorToken only with TokenExchange; requestedTokenType values; token type URI
//  [x] D1 local rate limit requests XOR tokens
//  [x] D1 extAuth grpc XOR http
//  [x] D1 BackendTLS verifySubjectAltNames XOR insecureSkipVerify; mtls max 1
//  [x] D1 frontend TLS versions 1.2/1.3 and min <= max; connect.mode required
//  [x] D1 OTLP path only with protocol HTTP
//  [x] D1 directResponse status 200..599, body XOR bodyExpression
//  [x] D1 Duration, ByteSize (every suffix form), CEL syntax, ShortString/TinyString/LongString lengths
//  [x] D1 Versioning: apiVersion sluice.dev/v1alpha1 only; kind CamelCase; deprecated backend.mcp.authentication
//  [x] D2 GwBackend exactly one variant; ai provider XOR groups; provider names unique across groups
//  [x] D2 LLMProvider exactly one variant; pathPrefix only providerA/providerD; custom needs backendRef or host+port
//  [x] D2 providerB deploymentName unless apiVersion v1; cloudC projectName for Foundry; providerG region
//  [x] D2 static: unixPath exclusive with host and port; host+port or unixPath
//  [x] D2 MCP target selector XOR static; static host XOR backendRef; policies only on host targets; unique names
//  [x] D2 MCP guardrail method patterns
//  [x] D2 policies.ai / policies.mcp only on backends of that type
//  [x] D2 prompt guard entries exactly one kind each (request: 5 kinds, response: 4 kinds)
//  [x] D2 GwModel provider XOR virtualModel; virtual model exactly one kind; settings only with their provider
//  [x] D2 failover priority bounds; conditional fallback last
//  [x] D2 baseURL http(s), no query, fragment or user info
//  [x] D2 GwParameters shutdown bounds and min <= max; HPA only for Deployment
//  [x] Both Limits tables, at the boundaries (see "limits" below) and the defaults they state

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { isCelError, run } from "@bufbuild/cel";
import { checkValue } from "../../src/api/check.js";
import type { Rule } from "../../src/api/schema-kit.js";
import { SLUICE_KINDS } from "../../src/api/sluice.js";
import { validateResource } from "../../src/api/validate.js";
import {
  ai,
  auth,
  B,
  backendAI,
  backendPol,
  type Case,
  caseDocument,
  G,
  type Json,
  jwtProvider,
  LIMIT_CASES,
  M,
  mcpTarget,
  model,
  P,
  pol,
  RULE_CASES,
  regexGuard,
  svcRef,
  traffic,
} from "../support/api-cases.js";
import { KUBE_CEL } from "../support/kube-cel.js";

/** Evaluates every x-kubernetes-validations rule with @bufbuild/cel next to its TypeScript predicate. */
function crossCheck(
  schema: Record<string, unknown>,
  value: unknown,
  path: string,
  out: string[],
  wellTyped: boolean,
): void {
  const rules = schema["x-kubernetes-validations"] as readonly Rule[] | undefined;
  for (const r of rules ?? []) {
    const cel = run(r.rule, { self: value as never }, KUBE_CEL);
    const ts = r.check(value);
    // On a document with structural errors the API server does not get to the rules; CEL may then fail on types.
    if (isCelError(cel) && !wellTyped) continue;
    if (isCelError(cel) || cel !== ts)
      out.push(`${path}: ${r.rule} -> CEL ${isCelError(cel) ? cel.message : String(cel)}, TypeScript ${ts}`);
  }
  if (Array.isArray(value) && schema["items"] !== undefined) {
    value.forEach((v, i) => {
      crossCheck(schema["items"] as Record<string, unknown>, v, `${path}[${i}]`, out, wellTyped);
    });
  } else if (typeof value === "object" && value !== null && !Array.isArray(value)) {
    const props = schema["properties"] as Record<string, Record<string, unknown>> | undefined;
    const add = schema["additionalProperties"] as Record<string, unknown> | undefined;
    for (const [k, v] of Object.entries(value)) {
      const s = props?.[k] ?? (typeof add === "object" ? add : undefined);
      if (s !== undefined) crossCheck(s, v, `${path}.${k}`, out, wellTyped);
    }
  }
}

function runCases(cases: readonly Case[]): void {
  for (const c of cases) {
    test(`${c.kind}: ${c.name}`, () => {
      const result = validateResource(caseDocument(c));
      const errors = result.problems.filter((p) => p.severity === "error");
      if (c.error === undefined) {
        assert.deepEqual(errors, [], "expected a valid document");
        assert.ok(result.resource !== undefined);
      } else {
        assert.equal(result.resource, undefined, "an invalid document yields no resource");
        const [path, message] = c.error;
        const hit = errors.find((p) => p.path === path && p.message.includes(message));
        assert.ok(
          hit,
          `expected ${path}: ${message}\n got: ${errors.map((p) => `${p.path}: ${p.message}`).join("\n      ")}`,
        );
      }
      // The CRD's CEL rules decide the same as the TypeScript predicates on the defaulted object.
      const def = SLUICE_KINDS.find((k) => k.kind === c.kind)!;
      const defaulted = checkValue(def.spec as unknown as Record<string, unknown>, c.spec, "spec", []);
      const mismatches: string[] = [];
      crossCheck(def.spec as unknown as Record<string, unknown>, defaulted, "spec", mismatches, c.error === undefined);
      assert.deepEqual(mismatches, []);
    });
  }
}

describe("rules of both documents", () => runCases(RULE_CASES));
describe("limits of both documents", () => runCases(LIMIT_CASES));

describe("defaults of the Limits tables", () => {
  const spec = (c: Case) =>
    (validateResource(caseDocument(c)).resource as unknown as { spec: Json }).spec as never as Record<string, never>;
  test("frontend defaults", () => {
    const s = spec(P("frontend", pol({ frontend: { tcp: { keepalive: {} }, tls: {}, http: {}, proxyProtocol: {} } })));
    const f = (s as Json)["frontend"] as Json;
    assert.deepEqual(f["tcp"], { keepalive: { retries: 9, time: "180s", interval: "180s" } });
    assert.deepEqual(f["tls"], { handshakeTimeout: "15s", alpnProtocols: ["h2", "http/1.1"] });
    const http = f["http"] as Json;
    assert.equal(http["http1MaxHeaders"], 100);
    assert.equal(http["http1IdleTimeout"], "10m");
    assert.equal(http["maxBufferSize"], "2Mi");
    assert.equal(http["http2FrameSize"], "16Ki");
    assert.equal(http["http2MaxHeaderSize"], "16Ki");
    assert.deepEqual(f["proxyProtocol"], { version: "V2", mode: "Strict" });
  });
  test("traffic and auth defaults", () => {
    const s = spec(
      P(
        "t",
        traffic({
          phase: undefined,
          jwtAuthentication: { providers: [jwtProvider({ remote: { jwksPath: "/k", backendRef: svcRef } })] },
          extAuth: { backendRef: svcRef, cache: { key: ["jwt.sub"], ttl: "1m" } },
          buffer: { request: {} },
        }),
      ),
    ) as Json;
    const t = s["traffic"] as Json;
    assert.equal(t["phase"], "PostRouting");
    const j = t["jwtAuthentication"] as { mode: string; location: unknown; providers: { jwks: { remote: Json } }[] };
    assert.equal(j.mode, "Strict");
    assert.deepEqual(j.location, { header: { name: "Authorization", prefix: "Bearer" } });
    assert.equal(j.providers[0]!.jwks.remote["cacheDuration"], "5m");
    assert.equal(((t["extAuth"] as Json)["cache"] as Json)["maxEntries"], 10000);
    assert.equal((t["extAuth"] as Json)["failureMode"], "FailClosed");
    assert.deepEqual((t["buffer"] as Json)["request"], { maxBytes: "2Mi", failureMode: "FailClosed" });
  });
  test("backend defaults: eviction, token cache, jwtSign ttl, secret keys", () => {
    const s = spec(
      P(
        "b",
        backendPol({
          health: { eviction: {} },
          auth: {
            oauthTokenExchange: {
              backendRef: svcRef,
              cache: { inMemory: {} },
              clientAuth: { clientId: "c", secretRef: { name: "s" } },
            },
          },
        }),
      ),
    ) as Json;
    const b = s["backend"] as Json;
    assert.equal(((b["health"] as Json)["eviction"] as Json)["duration"], "3s");
    const x = (b["auth"] as Json)["oauthTokenExchange"] as Json;
    assert.deepEqual(x["cache"], { inMemory: { maxEntries: 8192, defaultTtl: "300s" } });
    assert.equal(x["path"], "/");
    assert.equal(x["grantType"], "TokenExchange");
    assert.equal(((x["clientAuth"] as Json)["secretRef"] as Json)["key"], "clientSecret");
    const sign = spec(P("s", auth({ jwtSign: { signingKeyRef: { name: "k" }, claims: { a: 1 } } }))) as Json;
    const js = ((sign["backend"] as Json)["auth"] as Json)["jwtSign"] as Json;
    assert.equal(js["ttl"], "300s");
    assert.equal(js["alg"], "RS256");
    assert.equal((js["signingKeyRef"] as Json)["key"], "signingKey");
    const basic = spec(P("basic", traffic({ basicAuthentication: { secretRef: { name: "h" } } }))) as Json;
    const ba = (basic["traffic"] as Json)["basicAuthentication"] as Json;
    assert.equal((ba["secretRef"] as Json)["key"], ".htaccess");
    assert.equal(ba["realm"], "Restricted");
    assert.deepEqual(ba["location"], { header: { name: "Authorization", prefix: "Basic" } });
  });
  test("document 2 defaults", () => {
    const b = spec(
      // promptCaching is for providerG only.
      B("b", {
        ...backendAI({ promptCaching: {}, promptGuard: { request: [regexGuard] } }),
        ai: { provider: { providerG: {} } },
      }),
    ) as Json;
    const a = (b["policies"] as Json)["ai"] as Json;
    assert.deepEqual(a["promptCaching"], {
      cacheSystem: true,
      cacheMessages: true,
      cacheTools: false,
      minTokens: 1024,
      cacheMessageOffset: 0,
    });
    const g = spec(B("g", ai({ provider: { providerG: {} } }))) as Json;
    assert.equal((((g["ai"] as Json)["provider"] as Json)["providerG"] as Json)["region"], "us-east-1");
    const mcp = spec(B("mcp", { mcp: { targets: [mcpTarget("t")] } })) as Json;
    assert.deepEqual(
      { ...(mcp["mcp"] as Json), targets: undefined },
      {
        targets: undefined,
        sessionRouting: "Stateful",
        failureMode: "FailClosed",
        prefixMode: "Conditional",
      },
    );
    const m = spec(M("m", model({}))) as Json;
    assert.equal(m["visibility"], "Public");
    const p = spec(G("p", { workload: {}, logging: {}, mesh: {} })) as Json;
    assert.deepEqual(p["workload"], { kind: "Deployment" });
    assert.deepEqual(p["logging"], { level: "info", format: "text" });
    assert.equal((p["mesh"] as Json)["clusterId"], "Kubernetes");
  });
});
