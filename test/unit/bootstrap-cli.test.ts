// `sluice bootstrap`: delta xDS by default, `--sotw` for state of the world, `--delta` still accepted, and the two
// together refused; `--tls-*` for mutual TLS to Sluice.

import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { parse } from "yaml";
import { runBootstrap } from "../../src/cli/bootstrap.js";
import { validateWithEnvoy } from "../../src/cli/envoy.js";
import { createCa, issueGatewayCertificate } from "../../src/security/certificates.js";

async function run(args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = "";
  let err = "";
  const code = await runBootstrap(args, { stdout: (s) => (out += s), stderr: (s) => (err += s) });
  return { code, out, err };
}

const apiType = (yaml: string) => /api_type: (\w+)/.exec(yaml)?.[1];

test("bootstrap: delta xDS unless --sotw", async () => {
  assert.equal(apiType((await run(["--gateway", "ns/gw"])).out), "DELTA_GRPC");
  assert.equal(apiType((await run(["--gateway", "ns/gw", "--delta"])).out), "DELTA_GRPC");
  assert.equal(apiType((await run(["--gateway", "ns/gw", "--sotw"])).out), "GRPC");
});

test("bootstrap: --delta with --sotw is refused, naming both", async () => {
  const r = await run(["--gateway", "ns/gw", "--delta", "--sotw"]);
  assert.equal(r.code, 2);
  assert.equal(r.out, "");
  assert.match(r.err, /--delta and --sotw/);
});

interface Socket {
  readonly typed_config: {
    readonly "@type": string;
    readonly sni?: string;
    readonly common_tls_context: {
      readonly alpn_protocols: string[];
      readonly tls_certificates: unknown;
      readonly validation_context: unknown;
    };
  };
}

test("bootstrap: --tls-* give the five clusters that reach Sluice mutual TLS, which Envoy accepts", async () => {
  const dir = mkdtempSync(join(tmpdir(), "sluice-bootstrap-tls-"));
  try {
    const ca = await createCa();
    const issued = await issueGatewayCertificate(ca, "ns/gw");
    writeFileSync(join(dir, "tls.crt"), issued.cert);
    writeFileSync(join(dir, "tls.key"), issued.key);
    writeFileSync(join(dir, "ca.crt"), issued.ca);
    const files = [
      "--tls-cert",
      join(dir, "tls.crt"),
      "--tls-key",
      join(dir, "tls.key"),
      "--tls-ca",
      join(dir, "ca.crt"),
    ];
    for (const [extra, sni, san] of [
      [[], undefined, { san_type: "IP_ADDRESS", matcher: { exact: "127.0.0.1" } }],
      [
        ["--tls-server-name", "sluice.sluice-system.svc"],
        "sluice.sluice-system.svc",
        { san_type: "DNS", matcher: { exact: "sluice.sluice-system.svc" } },
      ],
    ] as const) {
      const r = await run(["--gateway", "ns/gw", ...files, ...extra]);
      assert.equal(r.code, 0, r.err);
      const clusters = (
        parse(r.out) as { static_resources: { clusters: { name: string; transport_socket?: Socket }[] } }
      ).static_resources.clusters;
      const alpn: Record<string, string[]> = {};
      for (const c of clusters) {
        const tls = c.transport_socket?.typed_config;
        assert.equal(
          tls?.["@type"],
          "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",
        );
        assert.equal(tls.sni, sni);
        assert.deepEqual(tls.common_tls_context.tls_certificates, [
          { certificate_chain: { filename: join(dir, "tls.crt") }, private_key: { filename: join(dir, "tls.key") } },
        ]);
        assert.deepEqual(tls.common_tls_context.validation_context, {
          trusted_ca: { filename: join(dir, "ca.crt") },
          match_typed_subject_alt_names: [san],
        });
        alpn[c.name] = tls.common_tls_context.alpn_protocols;
      }
      assert.deepEqual(alpn, {
        sluice_xds: ["h2"],
        sluice_services: ["h2"],
        sluice_authz: ["h2"],
        sluice_authz_http: ["http/1.1"],
        sluice_mcp: ["http/1.1"],
      });
      assert.equal(validateWithEnvoy(r.out), undefined);
    }
    // Without the flags, no transport socket (plaintext, as before).
    assert.doesNotMatch((await run(["--gateway", "ns/gw"])).out, /transport_socket/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("bootstrap: --tls-cert, --tls-key and --tls-ca go together", async () => {
  const r = await run(["--gateway", "ns/gw", "--tls-cert", "a.crt", "--tls-key", "a.key"]);
  assert.equal(r.code, 2);
  assert.match(r.err, /--tls-cert, --tls-key and --tls-ca go together/);
  const s = await run(["--gateway", "ns/gw", "--tls-server-name", "x"]);
  assert.equal(s.code, 2);
  assert.match(s.err, /--tls-server-name needs/);
});
