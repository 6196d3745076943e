// Gateway API and core kinds: the fields Sluice reads are type-checked at load, so a malformed document is reported
// (path and message) and left out instead of failing the whole translation.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { validateResource } from "../../src/api/validate.js";

const route = (spec: unknown) => ({
  apiVersion: "gateway.networking.k8s.io/v1",
  kind: "HTTPRoute",
  metadata: { name: "r", namespace: "default" },
  spec,
});

function problems(doc: unknown): string[] {
  return validateResource(doc).problems.map((p) => `${p.path}: ${p.message}`);
}

describe("Gateway API and core kinds: field types", () => {
  test("a well-formed HTTPRoute with every field Sluice reads passes", () => {
    const r = validateResource(
      route({
        parentRefs: [{ name: "gw", sectionName: "http", port: 80 }],
        hostnames: ["a.example"],
        rules: [
          {
            name: "one",
            matches: [
              { path: { type: "PathPrefix", value: "/" }, headers: [{ name: "x", value: "y" }], method: "GET" },
            ],
            filters: [{ type: "RequestHeaderModifier", requestHeaderModifier: { set: [{ name: "a", value: "b" }] } }],
            backendRefs: [{ name: "app", port: 80, weight: 3 }],
            timeouts: { request: "5s" },
          },
        ],
      }),
    );
    assert.deepEqual(r.problems, []);
    assert.ok(r.resource);
  });

  const cases: [string, unknown, string][] = [
    ["rules not a list", route({ rules: 3 }), "spec.rules: must be a list, not a number"],
    [
      "a match not a mapping",
      route({ rules: [{ matches: ["/"] }] }),
      "spec.rules[0].matches[0]: must be a mapping, not a string",
    ],
    [
      "a port as text",
      route({ rules: [{ backendRefs: [{ name: "a", port: "80" }] }] }),
      "spec.rules[0].backendRefs[0].port: must be a number, not a string",
    ],
    ["an empty list item", route({ parentRefs: [null] }), "spec.parentRefs[0]: must not be empty"],
    [
      "Gateway listeners not a list",
      {
        apiVersion: "gateway.networking.k8s.io/v1",
        kind: "Gateway",
        metadata: { name: "gw" },
        spec: { listeners: { name: "x" } },
      },
      "spec.listeners: must be a list, not a mapping",
    ],
    [
      "EndpointSlice addresses not a list",
      {
        apiVersion: "discovery.k8s.io/v1",
        kind: "EndpointSlice",
        metadata: { name: "s" },
        endpoints: [{ addresses: "10.0.0.1" }],
      },
      "endpoints[0].addresses: must be a list, not a string",
    ],
    [
      "Service targetPort may be a name, not a list",
      {
        apiVersion: "v1",
        kind: "Service",
        metadata: { name: "s" },
        spec: { ports: [{ port: 80, targetPort: ["x"] }] },
      },
      "spec.ports[0].targetPort: must be a string or number, not a list",
    ],
  ];
  for (const [name, doc, expected] of cases) {
    test(`${name}: reported with its path, resource left out`, () => {
      assert.deepEqual(problems(doc), [expected]);
      assert.equal(validateResource(doc).resource, undefined);
    });
  }

  test("a Service targetPort may be a number or a name", () => {
    for (const targetPort of [8080, "http"]) {
      const doc = {
        apiVersion: "v1",
        kind: "Service",
        metadata: { name: "s" },
        spec: { ports: [{ port: 80, targetPort }] },
      };
      assert.deepEqual(problems(doc), []);
    }
  });
});
