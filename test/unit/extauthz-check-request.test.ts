// The wire reader of CheckRequest (src/extauthz/check-request.ts) against protobuf-es decoding of the same bytes:
// the CEL activation, the policy id and the decision must be identical, whatever optional fields Envoy sends.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { create, type MessageInitShape, toBinary } from "@bufbuild/protobuf";
import { readCheckRequest } from "../../src/extauthz/check-request.js";
import { activationOf, buildActivation } from "../../src/extauthz/server.js";
import { CheckRequestSchema } from "../../src/gen/envoy/service/auth/v3/external_auth_pb.js";

type Init = MessageInitShape<typeof CheckRequestSchema>;

const peer = (address: string, port: number) => ({
  address: {
    address: {
      case: "socketAddress" as const,
      value: { address, portSpecifier: { case: "portValue" as const, value: port } },
    },
  },
});

const CASES: Record<string, Init> = {
  "typical request": {
    attributes: {
      source: peer("127.0.0.1", 45678),
      destination: peer("127.0.0.1", 8080),
      request: {
        time: { seconds: 1700000000n, nanos: 5 },
        http: {
          id: "42",
          method: "POST",
          headers: { ":path": "/a?x=1&y=%20z", "x-internal": "true", "user-agent": "ü-agent", "x-empty": "" },
          path: "/a?x=1&y=%20z",
          host: "api.example:8080",
          scheme: "https",
          protocol: "HTTP/2",
          size: 12n,
          body: "ignored body",
        },
      },
      contextExtensions: { "sluice.policy": "p-123", other: "x" },
      metadataContext: {
        filterMetadata: {
          "envoy.filters.http.jwt_authn": {
            jwt_payload: { sub: "alice", exp: 1700000600, groups: ["a", "b"], nested: { ok: true, n: null } },
          },
          other: { k: "v" },
        },
      },
      routeMetadataContext: { filterMetadata: { r: { a: 1 } } },
      tlsSession: { sni: "api.example" },
    },
  },
  "ipv6 peer, no port": {
    attributes: {
      source: { address: { address: { case: "socketAddress", value: { address: "::1" } } } },
      request: { http: { method: "GET", path: "/" } },
    },
  },
  "raw header map (encode_raw_headers)": {
    attributes: {
      source: peer("10.1.2.3", 1),
      request: {
        http: {
          method: "GET",
          path: "/p",
          headerMap: {
            headers: [
              { key: "X-Multi", rawValue: new TextEncoder().encode("one") },
              { key: "x-multi", rawValue: new TextEncoder().encode("two") },
              { key: "x-plain", value: "v" },
            ],
          },
        },
      },
    },
  },
  "no http request (network ext_authz)": {
    attributes: { source: peer("192.168.0.9", 5555), destination: peer("127.0.0.1", 9000) },
  },
  "empty message": {},
  "jwt namespace without payload": {
    attributes: {
      request: { http: { method: "GET", path: "/" } },
      metadataContext: { filterMetadata: { "envoy.filters.http.jwt_authn": {} } },
    },
  },
};

describe("CheckRequest wire reader", () => {
  for (const [name, init] of Object.entries(CASES)) {
    test(`${name}: same activation and policy id as protobuf-es`, () => {
      const message = create(CheckRequestSchema, init);
      const bytes = toBinary(CheckRequestSchema, message);
      const fields = readCheckRequest(bytes);
      for (const jwt of [false, true]) {
        const fast = activationOf(fields, jwt);
        const slow = buildActivation(message, jwt);
        assert.deepStrictEqual(normalize(fast), normalize(slow));
        // IP values are objects the normalization cannot print; the same peer gives the same cached value.
        assert.equal(fast.source?.address, slow.source?.address);
        assert.equal(fast.source?.port, slow.source?.port);
      }
      assert.equal(
        fields.contextExtensions.get("sluice.policy"),
        message.attributes?.contextExtensions["sluice.policy"],
      );
    });
  }

  test("truncated or corrupt bytes throw (the handler then denies) instead of reading garbage", () => {
    const bytes = toBinary(CheckRequestSchema, create(CheckRequestSchema, CASES["typical request"]));
    assert.throws(() => readCheckRequest(bytes.subarray(0, bytes.length - 7)));
    assert.throws(() => readCheckRequest(Uint8Array.of(0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f)));
  });
});

function normalize(a: object): unknown {
  return JSON.parse(
    JSON.stringify(a, (_k, v: unknown) => {
      if (v instanceof Map) return Object.fromEntries([...v.entries()].sort());
      if (typeof v === "bigint") return `${v}n`;
      if (v !== null && typeof v === "object" && !Array.isArray(v) && Object.getPrototypeOf(v) !== Object.prototype) {
        if (typeof (v as { entries?: unknown }).entries === "function") {
          return Object.fromEntries([...(v as ReadonlyMap<string, string>).entries()].sort());
        }
        return String(v);
      }
      return v;
    }),
  );
}
