// A GwPolicy's backend.tcp / backend.http on an AI GwBackend (xds/llm-connection.ts): applied to the AI cluster when
// every route reaching the GwBackend asks for the same, reported on each policy when the routes differ, and reported
// for a GwPolicy targeting one provider (Envoy's connection settings are a cluster's).

import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { fromBinary } from "@bufbuild/protobuf";
import { loadAndTranslate } from "../../src/cli/load.js";
import { HttpProtocolOptionsSchema } from "../../src/gen/envoy/extensions/upstreams/http/v3/http_protocol_options_pb.js";
import { gatewayYaml } from "../helpers/gateway.js";

const BASE = `${gatewayYaml(8080)}---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: llm, namespace: default }
spec:
  ai:
    groups:
      - providers: [{ name: one, providerA: {}, host: 127.0.0.1, port: 9001 }]
      - providers: [{ name: two, providerD: {}, host: 127.0.0.1, port: 9002 }]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - name: a
      matches: [{ path: { type: PathPrefix, value: /a } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: llm }]
    - name: b
      matches: [{ path: { type: PathPrefix, value: /b } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: llm }]
`;

const policy = (target: string, backend: string) => `---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: p, namespace: default }
spec:
  targetRefs: [${target}]
  backend:
${backend}`;

async function translated(yaml: string): Promise<{ connectTimeout: string; http2: boolean; notes: string[] }> {
  const dir = mkdtempSync(join(tmpdir(), "sluice-llm-connection-"));
  try {
    writeFileSync(join(dir, "in.yaml"), yaml);
    const { load, result } = await loadAndTranslate([join(dir, "in.yaml")]);
    assert.deepEqual(load.problems, []);
    const c = result.gateways[0]?.xds.clusters.find((x) => x.name === "backend/default/llm");
    assert.ok(c !== undefined, "the AI cluster");
    const seconds = Number(c.connectTimeout?.seconds ?? 0n);
    const any = c.typedExtensionProtocolOptions["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"];
    const options = any !== undefined ? fromBinary(HttpProtocolOptionsSchema, any.value) : undefined;
    const http2 =
      options?.upstreamProtocolOptions.case === "explicitHttpConfig" &&
      options.upstreamProtocolOptions.value.protocolConfig.case === "http2ProtocolOptions";
    const status = result.statuses.find((s) => s.kind === "GwPolicy" && s.name === "p");
    // The Warning conditions' messages, each naming its field.
    const warnings: string[] = [];
    const walk = (v: unknown): void => {
      if (Array.isArray(v)) v.forEach(walk);
      else if (typeof v === "object" && v !== null) {
        const o = v as Record<string, unknown>;
        if (o.type === "Warning" && typeof o.message === "string") warnings.push(o.message);
        else Object.values(o).forEach(walk);
      }
    };
    walk(status?.status);
    const notes = warnings.flatMap((m) => m.split("; ")).filter((m) => /^backend\.(tcp|http)/.test(m));
    return { connectTimeout: `${seconds}s`, http2, notes };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const GWB = "{ group: sluice.dev, kind: GwBackend, name: llm }";

test("a GwPolicy targeting the GwBackend sets its cluster's connect timeout and HTTP version", async () => {
  const none = await translated(BASE);
  assert.deepEqual([none.connectTimeout, none.http2], ["5s", false]);
  const set = await translated(BASE + policy(GWB, "    tcp: { connectTimeout: 2s }\n    http: { version: HTTP2 }\n"));
  assert.deepEqual(set, { connectTimeout: "2s", http2: true, notes: [] });
});

test("routes that ask for different settings: none applied, each policy told why", async () => {
  const r = await translated(
    BASE +
      policy(
        "{ group: gateway.networking.k8s.io, kind: HTTPRoute, name: r, sectionName: a }",
        "    tcp: { connectTimeout: 2s }\n",
      ),
  );
  assert.equal(r.connectTimeout, "5s");
  assert.equal(r.notes.length, 1);
  assert.match(
    r.notes[0] ?? "",
    /^backend\.tcp: not applied: the routes reaching AI GwBackend default\/llm ask for different tcp/,
  );
});

test("a GwPolicy for one provider (sectionName) is reported: connection settings are the cluster's", async () => {
  const r = await translated(
    BASE +
      policy(
        "{ group: sluice.dev, kind: GwBackend, name: llm, sectionName: two }",
        "    tcp: { connectTimeout: 2s }\n",
      ),
  );
  assert.equal(r.connectTimeout, "5s");
  assert.equal(r.notes.length, 1);
  assert.match(r.notes[0] ?? "", /^backend\.tcp: not applied to one provider/);
});
