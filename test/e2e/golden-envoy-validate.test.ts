// Every xDS golden must be accepted by Envoy itself: each golden's resources are embedded in a bootstrap
// (routes inlined into their HttpConnectionManager, EDS endpoints inlined into their cluster, SDS secrets read from
// static_resources) and checked with
// `envoy --mode validate`, which builds every listener, filter and cluster factory. The clusters of Sluice's own
// bootstrap (sluice_authz, sluice_authz_http, sluice_mcp ...) are added, as the real Envoy has them: routes may name
// them (a guarded Realtime route's relay twin routes to sluice_authz_http).

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { isIP } from "node:net";
import { join } from "node:path";
import { test } from "node:test";
import { promisify } from "node:util";
import { parse } from "yaml";
import { findEnvoy, renderBootstrap } from "../../src/cli/envoy.js";
import { goldenDir } from "../helpers/golden.js";

const run = promisify(execFile);

type Json = Record<string, unknown>;

interface GoldenGateway {
  gateway: string;
  clusters: Json[];
  endpoints: Json[];
  listeners: Json[];
  routes: Json[];
  secrets: Json[];
}

/** The bootstrap `sluice run` gives Envoy. */
const bootstrap = parse(
  renderBootstrap({
    nodeId: "validate",
    gateway: "validate/validate",
    adminPort: 0,
    xdsHost: "127.0.0.1",
    xdsPort: 1,
    authzPort: 2,
    mcpPort: 3,
    delta: false,
  }),
) as { static_resources: { clusters: Json[] }; bootstrap_extensions?: Json[] };

/** Clusters of the bootstrap `sluice run` gives Envoy, but the xDS one (no ADS here). */
const bootstrapClusters = (bootstrap.static_resources.clusters ?? []).filter((c) => c["name"] !== "sluice_xds");

/**
 * An EDS assignment as Sluice publishes it: a provider's host name in a translated assignment (an AI cluster Sluice
 * scores) is replaced by its addresses when Sluice publishes (src/health/provider-dns.ts, `overlay`); here by a
 * loopback address, since Envoy's EDS takes IP addresses only.
 */
function withAddresses(la: Json): Json {
  const out = structuredClone(la);
  for (const l of (out["endpoints"] as Json[] | undefined) ?? []) {
    for (const lb of (l["lb_endpoints"] as Json[] | undefined) ?? []) {
      const sa = ((lb["endpoint"] as Json | undefined)?.["address"] as Json | undefined)?.["socket_address"] as
        | Json
        | undefined;
      if (sa !== undefined && typeof sa["address"] === "string" && isIP(sa["address"]) === 0)
        sa["address"] = "127.0.0.1";
    }
  }
  return out;
}

/** Replaces ADS references by the resources themselves, so a static bootstrap carries the whole snapshot. */
export function embedSnapshot(g: GoldenGateway): Json {
  const routes = new Map(g.routes.map((r) => [r["name"] as string, r]));
  const endpoints = new Map(g.endpoints.map((e) => [e["cluster_name"] as string, e]));
  const listeners = structuredClone(g.listeners);
  for (const l of listeners) {
    for (const chain of (l["filter_chains"] as Json[] | undefined) ?? []) {
      for (const f of (chain["filters"] as Json[] | undefined) ?? []) {
        const hcm = f["typed_config"] as Json;
        const rds = hcm["rds"] as Json | undefined;
        if (rds === undefined) continue;
        const rc = routes.get(rds["route_config_name"] as string);
        assert.ok(rc, `route configuration ${String(rds["route_config_name"])} missing from the snapshot`);
        delete hcm["rds"];
        hcm["route_config"] = rc;
      }
    }
  }
  const clusters = structuredClone(g.clusters).map((c) => {
    if (c["type"] !== "EDS") return c;
    const name = ((c["eds_cluster_config"] as Json | undefined)?.["service_name"] as string) ?? (c["name"] as string);
    const la = endpoints.get(name);
    assert.ok(la, `endpoints of ${name} missing from the snapshot`);
    delete c["eds_cluster_config"];
    return { ...c, type: "STATIC", load_assignment: withAddresses(la) };
  });
  // SDS references to the snapshot's secrets read them from static_resources instead (no ADS here).
  const secretNames = new Set(g.secrets.map((sec) => sec["name"] as string));
  const embedSecrets = (v: unknown): void => {
    if (Array.isArray(v)) for (const x of v) embedSecrets(x);
    else if (typeof v === "object" && v !== null) {
      const o = v as Json;
      if (typeof o["name"] === "string" && secretNames.has(o["name"]) && o["sds_config"] !== undefined) {
        delete o["sds_config"];
      }
      for (const x of Object.values(o)) embedSecrets(x);
    }
  };
  embedSecrets(listeners);
  embedSecrets(clusters);
  const own = new Set(clusters.map((c) => c["name"]));
  return {
    node: { id: "validate", cluster: g.gateway },
    // Its extensions too: internal listeners (an AI provider's hop) need one.
    bootstrap_extensions: bootstrap.bootstrap_extensions ?? [],
    static_resources: {
      listeners,
      clusters: [...clusters, ...bootstrapClusters.filter((c) => !own.has(c["name"]))],
      secrets: g.secrets,
    },
  };
}

const dirs = [goldenDir("translate")];
const envoy = findEnvoy();

for (const dir of dirs) {
  for (const file of readdirSync(dir)
    .filter((f) => f.endsWith(".out.yaml"))
    .sort()) {
    test(`envoy --mode validate accepts ${file}`, async () => {
      const golden = parse(readFileSync(join(dir, file), "utf8")) as { gateways?: GoldenGateway[] };
      for (const g of golden.gateways ?? []) {
        const config = JSON.stringify(embedSnapshot(g));
        try {
          await run(envoy, ["--mode", "validate", "--config-yaml", config, "--disable-hot-restart", "-l", "error"], {
            timeout: 60_000,
          });
        } catch (e) {
          const err = e as { stderr?: string; stdout?: string; message: string };
          assert.fail(`Envoy rejected gateway ${g.gateway} of ${file}:\n${err.stderr || err.stdout || err.message}`);
        }
      }
    });
  }
}
