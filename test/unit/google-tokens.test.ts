// Google credentials → tokens against a fake of Google's token endpoint and metadata server (real wire format):
// the grants each credential type makes, caching until shortly before expiry, one fetch for concurrent requests, and
// errors for what cannot work.

import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { GoogleTokenError, GoogleTokens } from "../../src/extproc/llm/google-tokens.js";
import { type FakeGoogleAuth, startFakeGoogleAuth } from "../helpers/fake-google-auth.js";

describe("Google tokens", () => {
  let google: FakeGoogleAuth;
  before(async () => {
    google = await startFakeGoogleAuth();
  });
  after(() => google.close());

  test("a service account key: a signed JWT exchanged once, reused until a minute before it expires", async () => {
    let now = Date.now();
    const t = new GoogleTokens({ now: () => now, env: {} });
    const req = { type: "AccessToken" as const, credentials: google.serviceAccount };
    const grants = () => google.grants.filter((g) => g.kind === "jwt-bearer").length;
    const before = grants();
    const [a, b] = await Promise.all([t.token(req), t.token(req)]);
    assert.equal(a, b);
    assert.ok(google.issued(a));
    assert.equal(grants(), before + 1, "concurrent requests share one fetch");
    now += 3599_000 - 61_000;
    assert.equal(await t.token(req), a);
    now += 2_000;
    const c = await t.token(req);
    assert.notEqual(c, a);
    assert.equal(grants(), before + 2);
    const claims = google.grants.at(-1)?.claims;
    assert.equal(claims?.iss, google.serviceAccount.client_email);
    assert.equal(claims?.aud, google.tokenUri);
  });

  test("an authorized user: the refresh-token grant", async () => {
    const t = new GoogleTokens({ env: {} });
    const creds = {
      type: "authorized_user",
      client_id: "cid",
      client_secret: "secret",
      refresh_token: "1//refresh",
      token_uri: google.tokenUri,
    };
    const token = await t.token({ type: "AccessToken", credentials: creds });
    assert.match(token, /^ya29\.user-/);
    await assert.rejects(
      t.token({ type: "AccessToken", credentials: { ...creds, refresh_token: "1//revoked" } }),
      (e: unknown) => e instanceof GoogleTokenError && /answered 400/.test(e.message),
    );
    await assert.rejects(
      t.token({ type: "IdToken", credentials: creds, audience: "https://x" }),
      /need service account credentials/,
    );
  });

  test("ambient: GOOGLE_APPLICATION_CREDENTIALS first, else the metadata server", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sluice-adc-"));
    try {
      const file = join(dir, "adc.json");
      writeFileSync(file, JSON.stringify(google.serviceAccount));
      const fromFile = new GoogleTokens({ env: { GOOGLE_APPLICATION_CREDENTIALS: file } });
      assert.match(await fromFile.token({ type: "AccessToken" }), /^ya29\.sa-/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    const metadata = new GoogleTokens({ env: { GCE_METADATA_HOST: `127.0.0.1:${google.port}` } });
    assert.match(await metadata.token({ type: "AccessToken" }), /^ya29\.metadata-/);
  });

  test("credentials that cannot give a token say why", async () => {
    const t = new GoogleTokens({ env: {} });
    await assert.rejects(
      t.token({ type: "AccessToken", credentials: { type: "external_account" } }),
      /external_account are not supported/,
    );
    await assert.rejects(
      t.token({ type: "AccessToken", credentials: { type: "service_account", client_email: "x" } }),
      /need client_email and private_key/,
    );
  });
});
