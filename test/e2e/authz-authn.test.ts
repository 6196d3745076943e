// API keys, basic auth and L4 network authorization end to end: a real Envoy, `sluice serve` with its ext_authz
// service, and an echo upstream that shows which identity headers arrived.

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { after, before, describe, test } from "node:test";
import aprMd5Module from "apache-md5";
import bcrypt from "bcryptjs";
import unixCryptTD from "unix-crypt-td-js";
import { type EchoBody, freePort, request, startEchoUpstream, type Upstream, waitFor } from "../helpers/net.js";
import {
  type SluiceProcess,
  startSluice,
  startTestEnvoy,
  type TestEnvoy,
  tempConfigDir,
} from "../helpers/processes.js";

const aprMd5 = aprMd5Module as unknown as (password: string, salt: string) => string;
const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");
const b64 = (s: string) => Buffer.from(s).toString("base64");

const USERS: Record<string, { password: string; hash: string; kind: string }> = {
  alice: { password: "a-pass", hash: aprMd5("a-pass", "$apr1$s4ltS4lt$"), kind: "MD5 $apr1$" },
  bob: {
    password: "b-pass",
    hash: bcrypt.hashSync("b-pass", bcrypt.genSaltSync(4)).replace(/^\$2b\$/, "$2a$"),
    kind: "bcrypt $2a$",
  },
  carol: { password: "c-pass", hash: bcrypt.hashSync("c-pass", bcrypt.genSaltSync(4)), kind: "bcrypt $2b$" },
  dave: {
    password: "d-pass",
    hash: bcrypt.hashSync("d-pass", bcrypt.genSaltSync(4)).replace(/^\$2b\$/, "$2y$"),
    kind: "bcrypt $2y$",
  },
  erin: { password: "e-pass", hash: unixCryptTD("e-pass", "ab"), kind: "crypt" },
  frank: {
    password: "f-pass",
    hash: `{SHA}${createHash("sha1").update("f-pass").digest("base64")}`,
    kind: "SHA-1 {SHA}",
  },
};

const htpasswd = Object.entries(USERS)
  .map(([u, x]) => `${u}:${x.hash}`)
  .join("\n");

function route(name: string): string {
  return `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: ${name}, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules: [{ matches: [{ path: { type: PathPrefix, value: /${name} } }], backendRefs: [{ group: sluice.dev, kind: GwBackend, name: echo }] }]`;
}

function policy(name: string, traffic: string, annotations = ""): string {
  return `apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: ${name}, namespace: default${annotations ? `, annotations: { ${annotations} }` : ""} }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: HTTPRoute, name: ${name} }]
  traffic:
${traffic}`;
}

const KEYS = {
  plain: "k-plain-0123456789",
  json: "k-json-0123456789",
  hashed: "k-hashed-0123456789",
  selected: "k-selected-0123456789",
  configMap: "k-configmap-0123456789",
  rawInConfigMap: "k-raw-in-configmap-0123456789",
};

function httpConfig(port: number, up: Upstream): string {
  const docs: string[] = [
    `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: { name: gw, namespace: default }
spec:
  gatewayClassName: sluice
  addresses: [{ type: IPAddress, value: 127.0.0.1 }]
  listeners: [{ name: http, protocol: HTTP, port: ${port} }]`,
    `apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: echo, namespace: default }
spec: { static: { host: 127.0.0.1, port: ${up.port} } }`,
    `apiVersion: v1
kind: Secret
metadata: { name: keys, namespace: default }
stringData:
  plain: ${JSON.stringify(KEYS.plain)}
  json: ${JSON.stringify(JSON.stringify({ key: KEYS.json, metadata: { group: "gold", tier: 1 } }))}
  hashed: ${JSON.stringify(JSON.stringify({ keyHash: `sha256:${sha256(KEYS.hashed)}`, metadata: { group: "silver" } }))}`,
    `apiVersion: v1
kind: Secret
metadata: { name: selected-keys, namespace: default, labels: { sluice.test/keys: selected } }
data:
  one: ${b64(JSON.stringify({ key: KEYS.selected, metadata: { group: "selected" } }))}`,
    `apiVersion: v1
kind: ConfigMap
metadata: { name: cm-keys, namespace: default, labels: { sluice.test/keys: cm } }
data:
  good: ${JSON.stringify(JSON.stringify({ keyHash: `sha256:${sha256(KEYS.configMap)}`, metadata: { group: "cm" } }))}
  raw: ${JSON.stringify(KEYS.rawInConfigMap)}
  rawjson: ${JSON.stringify(JSON.stringify({ key: KEYS.rawInConfigMap }))}`,
    `apiVersion: v1
kind: Secret
metadata: { name: htpasswd, namespace: default }
stringData:
  .htaccess: ${JSON.stringify(htpasswd)}`,
  ];
  const keyPolicy = (name: string, body: string, annotations = "") => {
    docs.push(route(name), policy(name, `    apiKeyAuthentication:\n${body}`, annotations));
  };
  const meta = `"sluice.dev/api-key-metadata-header": x-key-meta`;
  keyPolicy("key-bearer", "      secretRef: { name: keys }", meta);
  keyPolicy("key-header", "      secretRef: { name: keys }\n      location: { header: { name: x-api-key } }");
  keyPolicy("key-query", "      secretRef: { name: keys }\n      location: { queryParameter: { name: api_key } }");
  keyPolicy("key-cookie", "      secretRef: { name: keys }\n      location: { cookie: { name: session-key } }");
  keyPolicy(
    "key-expr",
    `      secretRef: { name: keys }\n      location: { expression: "request.headers['x-alt'].lowerAscii()" }`,
  );
  keyPolicy("key-optional", "      secretRef: { name: keys }\n      mode: Optional", meta);
  keyPolicy("key-permissive", "      secretRef: { name: keys }\n      mode: Permissive", meta);
  keyPolicy("key-selector", "      secretSelector: { matchLabels: { sluice.test/keys: selected } }");
  keyPolicy("key-configmap", "      configMapSelector: { matchLabels: { sluice.test/keys: cm } }");
  docs.push(
    route("key-gold"),
    policy(
      "key-gold",
      `    apiKeyAuthentication: { secretRef: { name: keys } }
    authorization: { action: Require, policy: { matchExpressions: ["apiKey.group == 'gold'"] } }`,
    ),
  );
  docs.push(
    route("basic-users"),
    policy(
      "basic-users",
      `    basicAuthentication:
      realm: sluice-test
      users: ${JSON.stringify(Object.entries(USERS).map(([u, x]) => `${u}:${x.hash}`))}`,
      `"sluice.dev/basic-auth-username-header": x-user`,
    ),
    route("basic-secret"),
    policy(
      "basic-secret",
      `    basicAuthentication: { secretRef: { name: htpasswd }, mode: Optional }
    authorization: { action: Deny, policy: { matchExpressions: ["basicAuth.username == 'frank'"] } }`,
      `"sluice.dev/basic-auth-username-header": x-user`,
    ),
  );
  return `${docs.join("\n---\n")}\n`;
}

function echo(r: { body: string }): EchoBody {
  return JSON.parse(r.body) as EchoBody;
}

describe("API keys and basic auth through Envoy and Sluice's ext_authz", () => {
  const cfg = tempConfigDir();
  let port = 0;
  let up: Upstream;
  let sluice: SluiceProcess;
  let envoy: TestEnvoy;

  before(async () => {
    up = await startEchoUpstream("echo");
    port = await freePort();
    cfg.write("config.yaml", httpConfig(port, up));
    sluice = await startSluice("serve", cfg.dir);
    envoy = await startTestEnvoy(sluice);
    await waitFor("the routes", async () => ((await request(port, "/key-optional")).status === 200 ? true : undefined));
  });

  after(async () => {
    await envoy?.stop();
    await sluice?.stop();
    await up?.close();
    cfg.cleanup();
  });

  const get = (p: string, headers: Record<string, string> = {}) => request(port, p, { headers });
  const bearer = (k: string) => ({ authorization: `Bearer ${k}` });

  test("Secret entries: plain value, JSON key, JSON sha256 keyHash; Strict rejects missing and wrong keys", async () => {
    for (const k of [KEYS.plain, KEYS.json, KEYS.hashed])
      assert.equal((await get("/key-bearer", bearer(k))).status, 200, k);
    assert.equal((await get("/key-bearer")).status, 401);
    assert.equal((await get("/key-bearer", bearer("wrong"))).status, 401);
    assert.equal((await get("/key-bearer", { authorization: `Basic ${KEYS.plain}` })).status, 401); // prefix is Bearer
  });

  test("locations: header with prefix, custom header, query parameter, cookie, CEL expression", async () => {
    assert.equal((await get("/key-header", { "x-api-key": KEYS.json })).status, 200);
    assert.equal((await get("/key-header", bearer(KEYS.json))).status, 401);
    assert.equal((await get(`/key-query?api_key=${KEYS.json}`)).status, 200);
    assert.equal((await get("/key-query?api_key=nope")).status, 401);
    assert.equal((await get("/key-cookie", { cookie: `a=b; session-key=${KEYS.json}` })).status, 200);
    assert.equal((await get("/key-cookie", { cookie: "session-key=nope" })).status, 401);
    assert.equal((await get("/key-expr", { "x-alt": KEYS.json.toUpperCase() })).status, 200);
    assert.equal((await get("/key-expr")).status, 401);
  });

  test("modes: Optional allows no key but not a wrong one; Permissive never rejects", async () => {
    assert.equal((await get("/key-optional")).status, 200);
    assert.equal((await get("/key-optional", bearer("wrong"))).status, 401);
    assert.equal((await get("/key-optional", bearer(KEYS.plain))).status, 200);
    assert.equal((await get("/key-permissive")).status, 200);
    assert.equal((await get("/key-permissive", bearer("wrong"))).status, 200);
  });

  test("key metadata reaches the upstream as the annotated header; a client-sent one never does", async () => {
    const r = await get("/key-bearer", bearer(KEYS.json));
    assert.deepEqual(JSON.parse(String(echo(r).headers["x-key-meta"])), { group: "gold", tier: 1 });
    const hashed = await get("/key-bearer", { ...bearer(KEYS.hashed), "x-key-meta": "forged" });
    assert.deepEqual(JSON.parse(String(echo(hashed).headers["x-key-meta"])), { group: "silver" });
    const anon = await get("/key-optional", { "x-key-meta": '{"group":"gold"}' });
    assert.equal(echo(anon).headers["x-key-meta"], undefined);
    const permissiveWrong = await get("/key-permissive", { ...bearer("wrong"), "x-key-meta": "forged" });
    assert.equal(echo(permissiveWrong).headers["x-key-meta"], undefined);
  });

  test("key metadata in CEL: apiKey.group (authentication and authorization in one call)", async () => {
    assert.equal((await get("/key-gold", bearer(KEYS.json))).status, 200);
    assert.equal((await get("/key-gold", bearer(KEYS.hashed))).status, 403);
    assert.equal((await get("/key-gold", bearer(KEYS.plain))).status, 403); // no metadata: apiKey.group fails
    assert.equal((await get("/key-gold")).status, 401);
  });

  test("secretSelector and configMapSelector; a raw key in a ConfigMap is rejected", async () => {
    assert.equal((await get("/key-selector", bearer(KEYS.selected))).status, 200);
    assert.equal((await get("/key-selector", bearer(KEYS.plain))).status, 401);
    assert.equal((await get("/key-configmap", bearer(KEYS.configMap))).status, 200);
    assert.equal((await get("/key-configmap", bearer(KEYS.rawInConfigMap))).status, 401);
    const s = (await sluice.status()) as {
      resources: { kind: string; name: string; status: { ancestors: { conditions: Record<string, string>[] }[] } }[];
    };
    const conditions =
      s.resources.find((r) => r.kind === "GwPolicy" && r.name === "key-configmap")?.status.ancestors[0]?.conditions ??
      [];
    const warning = conditions.find((c) => c["type"] === "Warning");
    assert.equal(conditions.find((c) => c["type"] === "Accepted")?.["status"], "True");
    assert.match(warning?.["message"] ?? "", /cm-keys\.data\.raw: ConfigMap entries must be JSON objects/);
    assert.match(warning?.["message"] ?? "", /cm-keys\.data\.rawjson: ConfigMap entries must use "keyHash"/);
    assert.doesNotMatch(JSON.stringify(s), new RegExp(KEYS.rawInConfigMap)); // never echoed
    assert.doesNotMatch(sluice.output.join("\n"), /k-(plain|json|hashed|raw)/); // nor logged
  });

  test("basic auth: every hash format (MD5 $apr1$, bcrypt $2a$ $2b$ $2y$, crypt, SHA-1)", async () => {
    for (const [user, { password, kind }] of Object.entries(USERS)) {
      const r = await get("/basic-users", { authorization: `Basic ${b64(`${user}:${password}`)}` });
      assert.equal(r.status, 200, `${kind}: ${r.body}`);
      assert.equal(echo(r).headers["x-user"], user, kind);
      const wrong = await get("/basic-users", { authorization: `Basic ${b64(`${user}:not-${password}`)}` });
      assert.equal(wrong.status, 401, kind);
    }
  });

  test("basic auth: 401 with WWW-Authenticate and the realm; Strict requires credentials", async () => {
    const r = await get("/basic-users");
    assert.equal(r.status, 401);
    assert.equal(r.headers["www-authenticate"], 'Basic realm="sluice-test"');
    const bad = await get("/basic-users", { authorization: "Basic !!!" });
    assert.equal(bad.status, 401);
    assert.equal(bad.headers["www-authenticate"], 'Basic realm="sluice-test"');
  });

  test("basic auth from a .htaccess Secret, Optional mode, basicAuth.username in CEL", async () => {
    const anon = await get("/basic-secret", { "x-user": "forged" });
    assert.equal(anon.status, 200);
    assert.equal(echo(anon).headers["x-user"], undefined);
    const carol = await get("/basic-secret", { authorization: `Basic ${b64("carol:c-pass")}` });
    assert.equal(carol.status, 200);
    assert.equal(echo(carol).headers["x-user"], "carol");
    assert.equal((await get("/basic-secret", { authorization: `Basic ${b64("carol:nope")}` })).status, 401);
    assert.equal((await get("/basic-secret", { authorization: `Basic ${b64("frank:f-pass")}` })).status, 403);
    assert.equal(
      (await get("/basic-secret", { authorization: `Basic ${b64("carol:c-pass")}` })).headers["www-authenticate"],
      undefined,
    );
  });
});

function l4Config(port: number, name: string, expr: string): string {
  return `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: { name: ${name}, namespace: default }
spec:
  gatewayClassName: sluice
  addresses: [{ type: IPAddress, value: 127.0.0.1 }]
  listeners: [{ name: http, protocol: HTTP, port: ${port} }]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: ${name}, namespace: default }
spec:
  parentRefs: [{ name: ${name} }]
  rules: [{ backendRefs: [{ group: sluice.dev, kind: GwBackend, name: echo }] }]
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: ${name}, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: Gateway, name: ${name} }]
  frontend:
    networkAuthorization: { action: Allow, policy: { matchExpressions: [${JSON.stringify(expr)}] } }
`;
}

describe("frontend.networkAuthorization: network RBAC where it compiles, else network ext_authz → Sluice", () => {
  const cfg = tempConfigDir();
  const ports = { native: 0, sluice: 0 };
  let up: Upstream;
  let sluice: SluiceProcess;
  const envoys: TestEnvoy[] = [];

  const write = (native: string, viaSluice: string) => {
    cfg.write("native.yaml", l4Config(ports.native, "l4-native", native));
    cfg.write("sluice.yaml", l4Config(ports.sluice, "l4-sluice", viaSluice));
  };
  const connects = async (port: number) => {
    try {
      return (await request(port, "/", { timeoutMs: 2000 })).status === 200;
    } catch {
      return false;
    }
  };

  before(async () => {
    up = await startEchoUpstream("echo");
    ports.native = await freePort();
    ports.sluice = await freePort();
    cfg.write(
      "backend.yaml",
      `apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: echo, namespace: default }
spec: { static: { host: 127.0.0.1, port: ${up.port} } }
`,
    );
    write(
      "cidr('127.0.0.0/8').containsIP(source.address)",
      "cidr('10.0.0.0/8').containsIP(source.address) || source.port == 1",
    );
    sluice = await startSluice("serve", cfg.dir);
    for (const gw of ["l4-native", "l4-sluice"]) {
      envoys.push(await startTestEnvoy(sluice, { gateway: `default/${gw}` }));
    }
    await waitFor("the native gateway", async () => ((await connects(ports.native)) ? true : undefined));
  });

  after(async () => {
    for (const e of envoys) await e.stop();
    await sluice?.stop();
    await up?.close();
    cfg.cleanup();
  });

  test("the listeners carry the filter each rule compiles to", async () => {
    const [native, viaSluice] = await Promise.all(envoys.map(async (e) => JSON.stringify(await e.configDump())));
    assert.match(native ?? "", /sluice\.network_rbac\.allow/);
    assert.match(viaSluice ?? "", /sluice\.network_ext_authz/);
  });

  test("allowed and denied connections on both paths", async () => {
    assert.equal(await connects(ports.native), true);
    assert.equal(await connects(ports.sluice), false);
    write(
      "cidr('10.0.0.0/8').containsIP(source.address)",
      "cidr('127.0.0.0/8').containsIP(source.address) || source.port == 1",
    );
    await waitFor("the flipped rules", async () =>
      !(await connects(ports.native)) && (await connects(ports.sluice)) ? true : undefined,
    );
    assert.equal(await connects(ports.native), false);
    assert.equal(await connects(ports.sluice), true);
  });
});
