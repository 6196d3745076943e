// The translator's native/Sluice choice and the policy table, on the authz-paths golden input.
import assert from "node:assert/strict";
import { join } from "node:path";
import { describe, it } from "node:test";
import { translateLoad } from "../../src/cli/load.js";
import { httpCheckable } from "../../src/extauthz/server.js";
import { FileSource } from "../../src/sources/file-source.js";
import { sluiceExtAuthzHttp } from "../../src/translate/xds/filters/ext-authz-sluice.js";
import { xdsToJson } from "../../src/translate/xds/json.js";
import { goldenDir } from "../helpers/golden.js";

const file = join(goldenDir("translate"), "authz-paths.in.yaml");

describe("authorization path", () => {
  it("auto: rbac where rules compile, ext_authz for the rest; --authorization-path sluice: ext_authz only", async () => {
    const load = await new FileSource([file]).load();
    const auto = JSON.stringify(xdsToJson(translateLoad(load).gateways[0]!.xds));
    assert.match(auto, /sluice\.rbac\.allow/);
    assert.match(auto, /sluice\.network_rbac\.deny/);
    const sluice = translateLoad(load, { authorizationPath: "sluice" });
    const text = JSON.stringify(xdsToJson(sluice.gateways[0]!.xds));
    assert.doesNotMatch(text, /sluice\.rbac\.|network_rbac/);
    assert.match(text, /sluice\.network_ext_authz/);
    // Every id Envoy is given (a context extension, or route metadata for an HTTP check) is in the table.
    const ids = [...text.matchAll(/"(p-[0-9a-f]{32})"/g)].map((m) => m[1]!);
    assert.ok(ids.length >= 4);
    for (const id of ids) assert.ok(sluice.extAuthzPolicies.has(id), id);
  });

  it("sluice: authorization that reads only the request and its source is an HTTP check; sluice-grpc: gRPC only", async () => {
    const load = await new FileSource([file]).load();
    const sluice = translateLoad(load, { authorizationPath: "sluice" });
    const text = JSON.stringify(xdsToJson(sluice.gateways[0]!.xds));
    const httpIds = [...text.matchAll(/"authzPolicy":"(p-[0-9a-f]{32})"/g)].map((m) => m[1]!);
    assert.ok(httpIds.length >= 1, "no HTTP check");
    for (const id of httpIds) {
      const policy = sluice.extAuthzPolicies.get(id);
      assert.ok(policy !== undefined && httpCheckable(policy), id);
    }
    // The JWT-reading and authentication policies of the golden stay on gRPC.
    const grpcIds = [...text.matchAll(/"sluice\.policy":"(p-[0-9a-f]{32})"/g)].map((m) => m[1]!);
    assert.ok(grpcIds.some((id) => !httpCheckable(sluice.extAuthzPolicies.get(id)!)));
    // A client's x-sluice-authz-* headers never reach Sluice (disallowed), and every added header has a value even
    // when what it carries is empty (Envoy leaves out an empty one, which would let a client's through otherwise).
    const disallowed = sluiceExtAuthzHttp().disallowedHeaders?.patterns.map((p) => p.matchPattern);
    assert.deepEqual(disallowed, [{ case: "prefix", value: "x-sluice-authz-" }]);
    const added = sluiceExtAuthzHttp().services.value as {
      authorizationRequest?: { headersToAdd: { key: string; value: string }[] };
    };
    const headersToAdd = added.authorizationRequest?.headersToAdd ?? [];
    assert.ok(headersToAdd.length >= 5);
    for (const h of headersToAdd) {
      assert.ok(h.key.startsWith("x-sluice-authz-") && h.value.startsWith("v=%"), JSON.stringify(h));
    }
    const grpc = JSON.stringify(xdsToJson(translateLoad(load, { authorizationPath: "sluice-grpc" }).gateways[0]!.xds));
    assert.doesNotMatch(grpc, /sluice\.ext_authz\.authz_http|authzPolicy/);
    assert.match(grpc, /sluice\.ext_authz\.authz"/);
  });

  it("ids are content hashes: the same input gives the same ids, a changed rule a new one", async () => {
    const load = await new FileSource([file]).load();
    const a = [...translateLoad(load, { authorizationPath: "sluice" }).extAuthzPolicies.keys()];
    const b = [...translateLoad(load, { authorizationPath: "sluice" }).extAuthzPolicies.keys()];
    assert.deepEqual(a, b);
    const changed = {
      ...load,
      resources: load.resources.map((r) =>
        r.metadata.name === "cel" && r.kind === "GwPolicy"
          ? JSON.parse(JSON.stringify(r).replace("size() > 2", "size() > 3"))
          : r,
      ),
    };
    const c = [...translateLoad(changed, { authorizationPath: "sluice" }).extAuthzPolicies.keys()];
    assert.equal(c.filter((id) => !a.includes(id)).length, 1);
  });

  it("secrets never appear in the xDS or the status", async () => {
    const load = await new FileSource([file]).load();
    const r = translateLoad(load, { authorizationPath: "sluice" });
    const text = JSON.stringify([r.statuses, r.gateways.map((g) => xdsToJson(g.xds))]);
    assert.doesNotMatch(text, /not-a-json-entry|W6ph5Mm5Pz8GgiULbPgzG37mj9g/);
  });
});
