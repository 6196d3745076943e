// Evaluations/s of a typical authorization rule set, and in-process Check()s/s, against a no-rule baseline measured
// in the same run. Run: node dist/bench/cel-eval.js
import { create } from "@bufbuild/protobuf";
import { type CelActivation, ipValue, parsePeerIp } from "../src/cel/index.js";
import { authorize, compileAuthorization } from "../src/extauthz/authorization.js";
import { check, JWT_METADATA_NAMESPACE, JWT_PAYLOAD_KEY, POLICY_CONTEXT_KEY } from "../src/extauthz/server.js";
import { CheckRequestSchema } from "../src/gen/envoy/service/auth/v3/external_auth_pb.js";

const { authorization } = compileAuthorization([
  { path: "a", rule: { action: "Allow", policy: { matchExpressions: ["jwt.sub == 'alice'"] } } },
  { path: "r", rule: { action: "Require", policy: { matchExpressions: ["request.headers['x-internal'] == 'true'"] } } },
  {
    path: "d",
    rule: { action: "Deny", policy: { matchExpressions: ["!cidr('10.0.0.0/8').containsIP(source.address)"] } },
  },
]);
const empty = compileAuthorization([]).authorization;
const activation: CelActivation = {
  request: {
    method: "GET",
    path: "/api",
    host: "h",
    scheme: "http",
    headers: new Map([["x-internal", "true"]]),
    query: new Map(),
  },
  source: { address: ipValue(parsePeerIp("10.1.2.3")!), port: 1n },
  jwt: { sub: "alice" },
};

function rate(name: string, n: number, fn: () => unknown): number {
  for (let i = 0; i < n / 10; i++) fn();
  const t0 = performance.now();
  for (let i = 0; i < n; i++) fn();
  const perSec = n / ((performance.now() - t0) / 1000);
  console.log(`${name.padEnd(40)} ${Math.round(perSec).toLocaleString("en-US").padStart(12)} /s`);
  return perSec;
}

async function rateAsync(name: string, n: number, fn: () => Promise<unknown>): Promise<number> {
  for (let i = 0; i < n / 10; i++) await fn();
  const t0 = performance.now();
  for (let i = 0; i < n; i++) await fn();
  const perSec = n / ((performance.now() - t0) / 1000);
  console.log(`${name.padEnd(40)} ${Math.round(perSec).toLocaleString("en-US").padStart(12)} /s`);
  return perSec;
}

const base = rate("authorize, no rules (baseline)", 1_000_000, () => authorize(empty, activation));
const typical = rate("authorize, Deny+Require+Allow (3 exprs)", 300_000, () => authorize(authorization, activation));
console.log(`ratio typical/baseline: ${(typical / base).toFixed(3)}; ${(1e6 / typical).toFixed(2)} µs per decision`);

const policies = new Map([["p", { authorization, jwt: true }]]);
const req = create(CheckRequestSchema, {
  attributes: {
    source: {
      address: {
        address: {
          case: "socketAddress",
          value: { address: "10.1.2.3", portSpecifier: { case: "portValue", value: 5 } },
        },
      },
    },
    request: {
      http: {
        method: "GET",
        path: "/api?x=1",
        host: "h",
        scheme: "http",
        headers: { "x-internal": "true", "user-agent": "b" },
      },
    },
    contextExtensions: { [POLICY_CONTEXT_KEY]: "p" },
    metadataContext: { filterMetadata: { [JWT_METADATA_NAMESPACE]: { [JWT_PAYLOAD_KEY]: { sub: "alice" } } } },
  },
});
const emptyPolicies = new Map([["p", { authorization: empty, jwt: true }]]);
const cBase = await rateAsync("check(), no rules (baseline)", 200_000, () =>
  check(req, { policies: () => emptyPolicies }),
);
const cTyp = await rateAsync("check(), typical rules", 200_000, () => check(req, { policies: () => policies }));
console.log(`ratio typical/baseline: ${(cTyp / cBase).toFixed(3)}; ${(1e6 / cTyp).toFixed(2)} µs per Check (no gRPC)`);
