// Spec CEL → Envoy's CEL text for rate-limit descriptors (src/translate/xds/filters/envoy-cel.ts): the attributes
// whose meaning differs between the two are rewritten or refused.
import assert from "node:assert/strict";
import { test } from "node:test";
import { toEnvoyCel } from "../../src/translate/xds/filters/envoy-cel.js";

test("request.path becomes Envoy's url_path (no query), outside string literals only", () => {
  assert.equal(toEnvoyCel("request.path"), "request.url_path");
  assert.equal(toEnvoyCel("size(request.path)"), "size(request.url_path)");
  assert.equal(
    toEnvoyCel("request.path == 'request.path' ? \"request.path\" : request.path"),
    "request.url_path == 'request.path' ? \"request.path\" : request.url_path",
  );
  assert.equal(toEnvoyCel("request.headers['x-path']"), "request.headers['x-path']");
});

test("request.query (a map here, the raw query string in Envoy) is not evaluated by Envoy", () => {
  assert.equal(toEnvoyCel("request.query['user']"), undefined);
  assert.equal(toEnvoyCel("'request.query'"), "'request.query'");
});

test("jwt claims read the jwt_authn payload", () => {
  assert.equal(toEnvoyCel("jwt.sub"), "metadata.filter_metadata['envoy.filters.http.jwt_authn']['jwt_payload']['sub']");
  assert.equal(toEnvoyCel("source.address"), undefined);
});
