// Route configurations are assembled from per-route bytes (src/translate/xds/route-bytes.ts). The goldens compare
// the decoded messages; this checks the bytes themselves are what toBinary() writes for the whole message, on every
// golden input.

import assert from "node:assert/strict";
import { join } from "node:path";
import { test } from "node:test";
import { fromBinary, toBinary } from "@bufbuild/protobuf";
import { loadAndTranslate } from "../../src/cli/load.js";
import { RouteConfigurationSchema } from "../../src/gen/envoy/config/route/v3/route_pb.js";
import { joinParts } from "../../src/xds-server/index.js";
import { goldenCases, goldenDir } from "../helpers/golden.js";

for (const kind of ["translate", "policy"]) {
  const dir = goldenDir(kind);
  test(`route configuration bytes equal toBinary of the message: ${kind} goldens`, async () => {
    let checked = 0;
    for (const name of goldenCases(dir)) {
      const { result } = await loadAndTranslate([join(dir, `${name}.in.yaml`)]);
      for (const g of result.gateways) {
        const encoded = g.xds.encodedRoutes ?? [];
        assert.equal(encoded.length, g.xds.routes.length, `${name}: one encoding per route configuration`);
        for (const r of encoded) {
          const bytes = joinParts(r.parts);
          const whole = toBinary(RouteConfigurationSchema, fromBinary(RouteConfigurationSchema, bytes));
          assert.deepEqual(bytes, whole, `${name}: ${r.name}`);
          checked++;
        }
      }
    }
    assert.ok(checked > 0);
  });
}
