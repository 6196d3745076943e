// The sealed MCP session id: what one replica seals another with the same key opens; anything altered, sealed with
// another key, or presented on another Gateway's or backend's route is refused.

import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { describe, test } from "node:test";
import { SessionCodec, type SessionState } from "../../src/mcp/session-codec.js";

const ROUTE = "mcp/default/gw/default/tools";
const state: SessionState = {
  fmt: 1,
  route: ROUTE,
  pv: "2025-11-25",
  targets: [
    { n: "alpha", u: "http://10.0.0.1:8080/mcp", s: "target-session-1", v: "2025-11-25" },
    { n: "beta", u: "http://10.0.0.2:8080/mcp" },
  ],
  caps: { sampling: {} },
  iat: 1_700_000_000_000,
};

describe("MCP session codec", () => {
  const key = randomBytes(32);

  test("a replica with the same key opens what another sealed", () => {
    const token = new SessionCodec(key).seal(state);
    const r = new SessionCodec(Buffer.from(key)).open(token, ROUTE);
    assert.deepEqual(r, { ok: true, state });
    // Nothing of the state shows in the id.
    assert.ok(!token.includes("target-session-1") && !Buffer.from(token, "base64url").toString().includes("alpha"));
  });

  test("each seal differs (random IV), each opens", () => {
    const c = new SessionCodec(key);
    const a = c.seal(state);
    const b = c.seal(state);
    assert.notEqual(a, b);
    assert.equal(c.open(b, ROUTE).ok, true);
  });

  test("every altered byte is refused", () => {
    const c = new SessionCodec(key);
    const raw = Buffer.from(c.seal(state), "base64url");
    for (let i = 0; i < raw.byteLength; i++) {
      const t = Buffer.from(raw);
      t[i] = (t[i] ?? 0) ^ 0x01;
      const r = c.open(t.toString("base64url"), ROUTE);
      assert.equal(r.ok, false, `byte ${i}`);
    }
    // Truncated, extended.
    assert.deepEqual(c.open(raw.subarray(0, raw.byteLength - 1).toString("base64url"), ROUTE), {
      ok: false,
      reason: "forged",
    });
    assert.equal(c.open(Buffer.concat([raw, Buffer.from([0])]).toString("base64url"), ROUTE).ok, false);
  });

  test("another key, another route, junk: refused with the reason", () => {
    const token = new SessionCodec(key).seal(state);
    assert.deepEqual(new SessionCodec(randomBytes(32)).open(token, ROUTE), { ok: false, reason: "forged" });
    assert.deepEqual(new SessionCodec(key).open(token, "mcp/default/other-gw/default/tools"), {
      ok: false,
      reason: "other-route",
    });
    assert.deepEqual(new SessionCodec(key).open("not a token!", ROUTE), { ok: false, reason: "malformed" });
    assert.deepEqual(new SessionCodec(key).open("", ROUTE), { ok: false, reason: "malformed" });
    assert.deepEqual(new SessionCodec(key).open("A".repeat(20_000), ROUTE), { ok: false, reason: "malformed" });
  });

  test("SESSION_KEY: hex and base64 are the key's bytes, other text is hashed, absent warns", () => {
    const hex = key.toString("hex");
    const token = new SessionCodec(key).seal(state);
    const noWarn = () => assert.fail("no warning expected");
    assert.equal(SessionCodec.fromEnv(hex, noWarn).open(token, ROUTE).ok, true);
    assert.equal(SessionCodec.fromEnv(key.toString("base64"), noWarn).open(token, ROUTE).ok, true);
    const a = SessionCodec.fromEnv("a passphrase", noWarn);
    assert.equal(SessionCodec.fromEnv("a passphrase", noWarn).open(a.seal(state), ROUTE).ok, true);
    const warnings: string[] = [];
    const random = SessionCodec.fromEnv(undefined, (l) => warnings.push(l));
    assert.equal(warnings.length, 1);
    assert.match(warnings[0] ?? "", /SESSION_KEY is not set/);
    assert.equal(random.open(token, ROUTE).ok, false);
    assert.throws(() => new SessionCodec(randomBytes(16)), /32 bytes/);
  });
});
