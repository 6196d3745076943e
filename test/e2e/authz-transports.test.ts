// Sluice's ext_authz over its two transports gives CEL the same `request` and `source`: the HTTP check (policies that
// read only the request and its source) and the gRPC check (the rest). Each probe expression is a Require rule on two
// routes: `/http-<n>` plain, so Envoy checks it over HTTP, and `/grpc-<n>` with Optional JWT authentication (no token
// is sent), which makes the policy read `jwt` and go over gRPC. Every request must get the same answer from both, and
// the expected one. `request.headers.size() == k` for a range of k finds the same header count on both.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { exportJWK, generateKeyPair } from "jose";
import { startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { request, startEchoUpstream, type Upstream } from "../helpers/net.js";
import type { TestEnvoy } from "../helpers/processes.js";

interface Probe {
  readonly expr: string;
  /** Requests and the status each must get (on both transports). */
  readonly cases: readonly {
    readonly method?: string;
    readonly query?: string;
    readonly headers?: Record<string, string | string[]>;
    readonly body?: string;
    readonly status: number;
  }[];
}

const PROBES: readonly Probe[] = [
  {
    expr: "request.headers['x-multi'] == 'a,b'",
    cases: [
      { headers: { "x-multi": ["a", "b"] }, status: 200 },
      { headers: { "x-multi": "a" }, status: 403 },
    ],
  },
  {
    expr: "request.headers[':method'] == request.method && request.headers[':authority'] == request.host",
    cases: [{ status: 200 }, { method: "POST", body: "abc", status: 200 }],
  },
  {
    expr: "request.headers[':path'].startsWith('/') && request.headers[':path'].endsWith('?q=1')",
    cases: [
      { query: "?q=1", status: 200 },
      { query: "?q=2", status: 403 },
    ],
  },
  { expr: "request.query['q'] == '1'", cases: [{ query: "?q=1", status: 200 }, { status: 403 }] },
  { expr: "request.scheme == 'http' && request.headers[':scheme'] == 'http'", cases: [{ status: 200 }] },
  {
    expr: "source.port > 0 && cidr('127.0.0.0/8').containsIP(source.address)",
    cases: [{ status: 200 }],
  },
  {
    expr: "request.headers['content-length'] == '3'",
    cases: [{ method: "POST", body: "abc", status: 200 }, { status: 403 }],
  },
  // What Envoy's HTTP client sets on the check request is the request's own value (or absent) on both transports.
  {
    expr: "!('x-envoy-expected-rq-timeout-ms' in request.headers) && !('x-envoy-internal' in request.headers)",
    cases: [{ status: 200 }],
  },
  // A client's x-envoy-* header: Envoy removes it from an external request before any filter, on both transports.
  {
    expr: "request.headers['x-envoy-expected-rq-timeout-ms'] == '700'",
    cases: [{ headers: { "x-envoy-expected-rq-timeout-ms": "700" }, status: 403 }],
  },
  // Sluice's own check headers are reserved: a client's never shows, on either transport.
  {
    expr: "!('x-sluice-authz-source' in request.headers) && !('x-sluice-authz-original-content-length' in request.headers)",
    cases: [
      {
        headers: { "x-sluice-authz-source": "10.0.0.1:1", "x-sluice-authz-original-content-length": "9" },
        status: 200,
      },
    ],
  },
  // Body framing: Envoy's codec keeps transfer-encoding out of the header map on both transports, and a chunked body
  // does not hold up the HTTP check (which carries no body).
  {
    expr: "!('transfer-encoding' in request.headers) && request.method == 'POST'",
    cases: [{ method: "POST", headers: { "transfer-encoding": "chunked" }, body: "abc", status: 200 }, { status: 403 }],
  },
  {
    expr: "request.headers['expect'] == '100-continue' || !('expect' in request.headers)",
    cases: [{ method: "POST", headers: { expect: "100-continue" }, body: "abc", status: 200 }],
  },
  // Cookies given as a list (Node's client sends them as one line joined with "; ").
  {
    expr: "request.headers['cookie'] == 'a=1; b=2'",
    cases: [{ headers: { cookie: ["a=1", "b=2"] }, status: 200 }],
  },
  // A UTF-8 header value (sent as its bytes: Node writes each character of a string below U+0100 as one byte).
  {
    expr: "request.headers['x-utf8'] == 'café ✓'",
    cases: [{ headers: { "x-utf8": Buffer.from("café ✓").toString("latin1") }, status: 200 }],
  },
  // A large header (a big cookie or token), more than Node's HTTP parser accepts by default (16 KiB).
  {
    expr: "request.headers['x-big'].size() == 20000",
    cases: [{ headers: { "x-big": "b".repeat(20_000) }, status: 200 }],
  },
  {
    expr: "request.headers['x-Mixed-Case'] == 'v' || request.headers['x-mixed-case'] == 'v'",
    cases: [{ headers: { "X-Mixed-Case": "v" }, status: 200 }],
  },
];

/** Header counts probed with `request.headers.size() == k`. */
const SIZES = Array.from({ length: 24 }, (_, i) => i + 4);

/** The routes and policies of the probes (the Gateway is the helper's). */
function configYaml(up: Upstream, jwks: string): string {
  const docs = [
    `apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: echo, namespace: default }
spec: { static: { host: 127.0.0.1, port: ${up.port} } }`,
  ];
  const route = (name: string, expr: string, jwt: boolean) => {
    docs.push(`apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: ${name}, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules: [{ matches: [{ path: { type: PathPrefix, value: /${name} } }], backendRefs: [{ group: sluice.dev, kind: GwBackend, name: echo }] }]`);
    const target = `targetRefs: [{ group: gateway.networking.k8s.io, kind: HTTPRoute, name: ${name} }]`;
    docs.push(`apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: ${name}, namespace: default }
spec:
  ${target}
  traffic:
    authorization: { action: Require, policy: { matchExpressions: ${JSON.stringify([expr])} } }${
      jwt
        ? `
    jwtAuthentication:
      mode: Optional
      providers: [{ issuer: "https://issuer.sluice.test", jwks: { inline: ${JSON.stringify(jwks)} } }]`
        : ""
    }`);
  };
  const exprs = [...PROBES.map((p) => p.expr), ...SIZES.map((k) => `request.headers.size() == ${k}`)];
  exprs.forEach((expr, i) => {
    route(`http-${i}`, expr, false);
    route(`grpc-${i}`, expr, true);
  });
  return `---\n${docs.join("\n---\n")}\n`;
}

/** Calls `visit` on every object of an Envoy config dump. */
function walk(v: unknown, visit: (o: Record<string, unknown>) => void): void {
  if (Array.isArray(v)) for (const x of v) walk(x, visit);
  else if (v !== null && typeof v === "object") {
    visit(v as Record<string, unknown>);
    for (const x of Object.values(v)) walk(x, visit);
  }
}

describe("Sluice ext_authz: the HTTP and gRPC checks see the same request", () => {
  let up: Upstream;
  let gw: TestGateway;
  let port = 0;
  let envoy: TestEnvoy;

  before(async () => {
    const { publicKey } = await generateKeyPair("RS256");
    const jwk = { ...(await exportJWK(publicKey)), kid: "k1", alg: "RS256", use: "sig" };
    up = await startEchoUpstream("echo");
    gw = await startTestGateway(() => configYaml(up, JSON.stringify({ keys: [jwk] })), "/http-4", undefined, [
      "--authorization-path",
      "sluice",
    ]);
    port = gw.port;
    envoy = gw.envoy;
  });

  after(async () => {
    await gw?.stop();
    await up?.close();
  });

  test("the plain routes are checked over HTTP, the JWT ones over gRPC", async () => {
    const dump = await envoy.configDump();
    /** The typed_per_filter_config keys of the route named `name`, wherever it is in the dump. */
    const filtersOf = (name: string): string[] => {
      const found: string[][] = [];
      walk(dump, (o) => {
        if (o["name"] === `httproute/default/${name}/rule/0/match/0`) {
          found.push(Object.keys((o["typed_per_filter_config"] ?? {}) as object));
        }
      });
      assert.ok(found.length >= 1, name);
      return found[0] ?? [];
    };
    // http-0 reads one header by name: its check is an instance sending only that (sluice.ext_authz.authz_http/<hash>).
    assert.ok(filtersOf("http-0").some((f) => f.startsWith("sluice.ext_authz.authz_http/")));
    assert.ok(!filtersOf("http-0").includes("sluice.ext_authz.authz"));
    assert.ok(filtersOf("grpc-0").includes("sluice.ext_authz.authz"));
    assert.ok(!filtersOf("grpc-0").some((f) => f.startsWith("sluice.ext_authz.authz_http")));
    // A policy reading the header map as a whole gets another instance (every header).
    const whole = filtersOf(`http-${PROBES.length}`).filter((f) => f.startsWith("sluice.ext_authz.authz_http"));
    assert.equal(whole.length, 1);
    assert.ok(!filtersOf("http-0").includes(whole[0]!));
  });

  test("a client cannot name the policy of its check (x-sluice-authz-* headers are Envoy's alone)", async () => {
    // http-0 requires x-multi == 'a,b'; some size probes' policies admit a request with as many headers as this one.
    // Sending any route's policy id (marked or not), and a source of its own, changes nothing.
    const ids: string[] = [];
    walk(await envoy.configDump(), (o) => {
      if (typeof o["authzPolicy"] === "string") ids.push(o["authzPolicy"]);
    });
    assert.ok(ids.length >= PROBES.length, `policy ids in route metadata: ${ids.length}`);
    for (const id of new Set(ids)) {
      for (const value of [id, `v=${id}`]) {
        const r = await request(port, "/http-0", {
          headers: { "x-sluice-authz-policy": value, "x-sluice-authz-source": "v=10.0.0.1:1" },
        });
        assert.equal(r.status, 403, `policy ${value} chosen by the client`);
      }
    }
  });

  for (const [i, probe] of PROBES.entries()) {
    test(`same answer on both transports: ${probe.expr}`, async () => {
      for (const c of probe.cases) {
        const got: number[] = [];
        for (const kind of ["http", "grpc"]) {
          const r = await request(port, `/${kind}-${i}${c.query ?? ""}`, {
            ...(c.method !== undefined ? { method: c.method } : {}),
            ...(c.headers !== undefined ? { headers: c.headers } : {}),
            ...(c.body !== undefined ? { body: c.body } : {}),
          });
          got.push(r.status);
        }
        const shown = JSON.stringify(c, (_k, v: unknown) =>
          typeof v === "string" && v.length > 80 ? `<${v.length} chars>` : v,
        );
        assert.deepEqual(got, [c.status, c.status], `${shown}: http ${got[0]}, grpc ${got[1]}`);
      }
    });
  }

  test("the same number of headers on both transports (GET and POST)", async () => {
    for (const method of ["GET", "POST"]) {
      const matched: Record<string, number[]> = { http: [], grpc: [] };
      for (const [j, k] of SIZES.entries()) {
        const i = PROBES.length + j;
        for (const kind of ["http", "grpc"] as const) {
          const r = await request(port, `/${kind}-${i}`, {
            method,
            headers: { "x-one": "1", "x-two": "2" },
            ...(method === "POST" ? { body: "abc" } : {}),
          });
          if (r.status === 200) matched[kind]?.push(k);
        }
      }
      assert.equal(matched["http"]?.length, 1, `${method}: http matched sizes ${matched["http"]}`);
      assert.deepEqual(matched["http"], matched["grpc"], method);
    }
  });
});
