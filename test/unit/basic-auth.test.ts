// Vectors generated on this machine with Apache's `htpasswd` (apache2-utils 2.4.71: -m, -B, -d, -s), `openssl passwd`
// (-apr1, -1) and glibc crypt(3) via Python; the $2a$ vector is from the OpenBSD/Openwall bcrypt test set.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { CelActivation } from "../../src/cel/index.js";
import {
  type BasicAuthSpec,
  checkBasicAuth,
  compileBasicAuth,
  hashKind,
  parseHtpasswd,
  verifyPassword,
} from "../../src/extauthz/basic-auth.js";

const VECTORS: [string, string, string, string][] = [
  // user, password, hash, kind
  ["alice", "s3cret", "$apr1$h64NueI9$cRWhNJg91n2mOhMj7Sy/D/", "apr1"],
  ["erin", "pässwörd", "$apr1$o0MJCq27$0NGEcnYIE1kDkD2LuGxQn.", "apr1"],
  ["olga", "ünïcode", "$apr1$abcdefgh$RseaHM3OTygvWlcYBh/c90", "apr1"],
  ["md5", "password", "$1$saltsalt$qjXMvbEw8oaL.CzflDtaK/", "md5crypt"],
  ["bob", "hunter2", "$2y$05$QUkW6vA1XFv4OZsoV57vs.rFNXVCL3YKQeOfGA6NsdgKzkaR6qA8O", "bcrypt"],
  ["bob2b", "hunter2", "$2b$05$QUkW6vA1XFv4OZsoV57vs.rFNXVCL3YKQeOfGA6NsdgKzkaR6qA8O", "bcrypt"],
  ["gina", "pässwörd", "$2y$04$l9gRJcpv.gvl3u1Kx2J7ju8xtkZW/k.kA7NT/r63JuQ2VyPSiGWwO", "bcrypt"],
  ["uu", "U*U", "$2a$05$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW", "bcrypt"],
  ["carol", "passw0rd", "WsMigJP/M3kcM", "crypt"],
  ["frank", "longpassword123", "PMX2GEaJSIbTA", "crypt"],
  ["glibc", "password", "abJnggxhB/yWI", "crypt"],
  ["zz", "pässwörd", "ZzwM.07XybWK6", "crypt"],
  ["dave", "letmein", "{SHA}t6h1/B6iKLkGEEG3zsS9PFKrPOM=", "sha1"],
];

const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString("base64")}`;

function req(headers: Record<string, string>): CelActivation {
  return {
    request: {
      method: "GET",
      path: "/",
      host: "h",
      scheme: "http",
      headers: new Map(Object.entries(headers)),
      query: new Map(),
    },
  };
}

describe("htpasswd hashes", () => {
  for (const [user, password, hash, kind] of VECTORS) {
    it(`${kind} ${hash.slice(0, 12)}…`, async () => {
      assert.equal(hashKind(hash), kind);
      const u = { username: user, kind: hashKind(hash)!, hash };
      assert.equal(await verifyPassword(u, password), true);
      assert.equal(await verifyPassword(u, `#${password.slice(1)}`), false);
      assert.equal(await verifyPassword(u, ""), false);
    });
  }

  it("DES crypt only reads 8 characters (as crypt(3) does)", async () => {
    assert.equal(await verifyPassword({ username: "f", kind: "crypt", hash: "PMX2GEaJSIbTA" }, "longpassXXXX"), true);
  });

  it("rejects raw passwords and malformed lines, naming the user but not the hash", () => {
    const { users, problems } = parseHtpasswd(
      [
        "# comment",
        "",
        "alice:$apr1$h64NueI9$cRWhNJg91n2mOhMj7Sy/D/",
        "plain:secretpw",
        "nocolon",
        "alice:{SHA}t6h1/B6iKLkGEEG3zsS9PFKrPOM=",
      ],
      (i) => `users[${i}]`,
    );
    assert.deepEqual([...users.keys()], ["alice"]);
    assert.deepEqual(
      problems.map((p) => p.path),
      ["users[3]", "users[4]", "users[5]"],
    );
    assert.match(problems[0]!.message, /user "plain": unsupported or malformed hash/);
    assert.doesNotMatch(problems[0]!.message, /secretpw/);
  });
});

describe("basic authentication", () => {
  const users = VECTORS.map(([u, , h]) => `${u}:${h}`);
  const compile = (spec: Partial<BasicAuthSpec>) => {
    const r = compileBasicAuth({ users, ...spec }, "spec.traffic.basicAuthentication");
    assert.ok(r.auth, JSON.stringify(r.problems));
    return r.auth;
  };

  it("authenticates every hash format through the Authorization header", async () => {
    const auth = compile({});
    for (const [user, password] of VECTORS) {
      assert.deepEqual(await checkBasicAuth(auth, req({ authorization: basic(user, password) })), {
        outcome: "authenticated",
        username: user,
      });
    }
  });

  it("Strict: missing, malformed and wrong credentials are denied with the realm", async () => {
    const auth = compile({ realm: 'My "API"' });
    const want = (reason: string) => ({ outcome: "denied", reason, wwwAuthenticate: 'Basic realm="My \\"API\\""' });
    assert.deepEqual(await checkBasicAuth(auth, req({})), want("missing"));
    assert.deepEqual(await checkBasicAuth(auth, req({ authorization: "Basic !!!" })), want("malformed"));
    assert.deepEqual(await checkBasicAuth(auth, req({ authorization: basic("alice", "nope") })), want("invalid"));
    assert.deepEqual(await checkBasicAuth(auth, req({ authorization: basic("nobody", "x") })), want("invalid"));
  });

  it("the default realm is Restricted", () => {
    assert.equal(compile({}).wwwAuthenticate, 'Basic realm="Restricted"');
  });

  it("Optional: absent credentials pass anonymously, wrong ones are denied", async () => {
    const auth = compile({ mode: "Optional" });
    assert.deepEqual(await checkBasicAuth(auth, req({})), { outcome: "anonymous" });
    assert.equal((await checkBasicAuth(auth, req({ authorization: basic("alice", "x") }))).outcome, "denied");
    assert.equal(
      (await checkBasicAuth(auth, req({ authorization: basic("alice", "s3cret") }))).outcome,
      "authenticated",
    );
  });

  it("reads the whole .htaccess file from a Secret, and other locations", async () => {
    const r = compileBasicAuth(
      { htpasswd: `${users.join("\r\n")}\n`, location: { header: { name: "x-auth", prefix: "Basic" } } },
      "p",
    );
    assert.ok(r.auth);
    assert.equal((await checkBasicAuth(r.auth, req({ "x-auth": basic("dave", "letmein") }))).outcome, "authenticated");
  });

  it("remembers a successful bcrypt verification, never a failed one", async () => {
    const auth = compile({});
    const ok = req({ authorization: basic("bob", "hunter2") });
    let t0 = performance.now();
    await checkBasicAuth(auth, ok);
    const bcrypt = performance.now() - t0;
    assert.equal(auth.verified.size, 1);
    await checkBasicAuth(auth, req({ authorization: basic("bob", "wrong") }));
    assert.equal(auth.verified.size, 1);
    // Relative to the bcrypt run it replaces, so a loaded machine slows both alike; the fastest of a few runs, so one
    // garbage collection or preempted slice during a run does not count as a bcrypt.
    let cached = Number.POSITIVE_INFINITY;
    for (let i = 0; i < 5; i++) {
      t0 = performance.now();
      assert.equal((await checkBasicAuth(auth, ok)).outcome, "authenticated");
      cached = Math.min(cached, performance.now() - t0);
    }
    assert.ok(cached < bcrypt / 4, `the cached check does not run bcrypt (${cached} ms against ${bcrypt} ms)`);
  });

  it("reports configuration problems instead of throwing", () => {
    assert.equal(compileBasicAuth({}, "p").problems[0]?.message, "exactly one of users and secretRef is required");
    assert.deepEqual(
      compileBasicAuth({ users: ["a:plain"], mode: "Never" as never }, "p").problems.map((x) => x.path),
      ["p.mode", "p.users[0]"],
    );
  });
});
