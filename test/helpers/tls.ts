// The TLS fixtures (test/fixtures/tls: self-signed certificates and keys for example.com, foo.example.com and
// wildcard.example.org) and a way to write them into YAML block scalars.

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { projectRoot } from "../../src/cli/paths.js";

/** A file of test/fixtures/tls, e.g. `example.com.crt`. */
export function tlsFixture(file: string): string {
  return readFileSync(join(projectRoot(), "test", "fixtures", "tls", file), "utf8");
}

/** `text` with every line indented by `spaces`, for a YAML block scalar. */
export function indentLines(text: string, spaces = 4): string {
  return text
    .trim()
    .split("\n")
    .map((l) => `${" ".repeat(spaces)}${l}`)
    .join("\n");
}

/**
 * A ConfigMap (one YAML document, from `---` to its last line's newline) holding a fixture certificate as `ca.crt`,
 * the key a `caCertificateRefs` entry reads.
 */
export function caConfigMapYaml(name = "example-ca", certificate = "example.com.crt"): string {
  return `---
apiVersion: v1
kind: ConfigMap
metadata: { name: ${name}, namespace: default }
data:
  ca.crt: |
${indentLines(tlsFixture(certificate), 4)}
`;
}

/** A kubernetes.io/tls Secret (one YAML document) with a fixture's certificate and key, as `mtlsCertificateRef` names. */
export function tlsSecretYaml(name = "client-cert", host = "foo.example.com"): string {
  return `---
apiVersion: v1
kind: Secret
metadata: { name: ${name}, namespace: default }
type: kubernetes.io/tls
stringData:
  tls.crt: |
${indentLines(tlsFixture(`${host}.crt`), 4)}
  tls.key: |
${indentLines(tlsFixture(`${host}.key`), 4)}
`;
}
