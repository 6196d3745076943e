// Mutual TLS for `sluice serve` / `sluice run` (`--xds-ca <dir>`) and `sluice certificate`: the CA kept in a
// directory (ca.crt, ca.key; created when absent), Sluice's serving certificate issued from it at start, and Gateway
// client certificates written as tls.crt, tls.key, ca.crt (the layout of a Kubernetes TLS Secret). docs/xds-security.md.

import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { isIP } from "node:net";
import { join } from "node:path";
import {
  type CertificateAuthority,
  createCa,
  issueGatewayCertificate,
  issueServerCertificate,
} from "../security/certificates.js";
import type { MutualTls } from "../security/tls.js";
import type { BootstrapTls } from "./envoy.js";

export const XDS_TLS_OPTIONS = {
  // A directory with Sluice's CA (ca.crt, ca.key), created when absent: ADS, ext_proc and ext_authz then take only
  // clients with a certificate of this CA, and an Envoy only its own Gateway's configuration.
  "xds-ca": { type: "string" },
  // More DNS names for Sluice's serving certificate (the names Envoys reach it by; localhost and the xds host are in).
  "xds-server-name": { type: "string", multiple: true },
} as const;

/** The CA in `dir`, created (key readable by the owner only) when neither file is there. */
export async function loadOrCreateCa(dir: string): Promise<{ ca: CertificateAuthority; created: boolean }> {
  const certFile = join(dir, "ca.crt");
  const keyFile = join(dir, "ca.key");
  const haveCert = existsSync(certFile);
  const haveKey = existsSync(keyFile);
  if (haveCert && haveKey)
    return { ca: { cert: readFileSync(certFile, "utf8"), key: readFileSync(keyFile, "utf8") }, created: false };
  if (haveCert || haveKey)
    throw new Error(
      `${dir} holds ${haveCert ? "ca.crt without ca.key" : "ca.key without ca.crt"}; give both or neither`,
    );
  const ca = await createCa();
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  writeFileSync(keyFile, ca.key, { mode: 0o600, flag: "wx" });
  writeFileSync(certFile, ca.cert, { flag: "wx" });
  return { ca, created: true };
}

/** Whether `host` is an address every interface listens on (not a name a client can reach the server by). */
function unspecified(host: string): boolean {
  return host === "0.0.0.0" || host === "::" || host === "[::]";
}

/**
 * Sluice's serving certificate: localhost, 127.0.0.1 and ::1, the xds host (name or address), and `names`. Issued at
 * each start, from the CA, so Envoys that trust the CA trust it.
 */
export async function serverTls(ca: CertificateAuthority, host: string, names: readonly string[]): Promise<MutualTls> {
  const dnsNames = new Set(["localhost", ...names]);
  const ipAddresses = new Set(["127.0.0.1", "::1"]);
  if (isIP(host) !== 0) {
    if (!unspecified(host)) ipAddresses.add(host);
  } else if (!unspecified(host)) dnsNames.add(host);
  const issued = await issueServerCertificate(ca, { dnsNames: [...dnsNames], ipAddresses: [...ipAddresses] });
  return { cert: issued.cert, key: issued.key, ca: ca.cert };
}

/** Issues Gateway `gateway`'s client certificate into `dir`: tls.crt, tls.key (readable by the owner only), ca.crt. */
export async function writeGatewayCertificate(
  ca: CertificateAuthority,
  gateway: string,
  dir: string,
): Promise<Omit<BootstrapTls, "serverName">> {
  const issued = await issueGatewayCertificate(ca, gateway);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const tls = { certFile: join(dir, "tls.crt"), keyFile: join(dir, "tls.key"), caFile: join(dir, "ca.crt") };
  writeFileSync(tls.keyFile, issued.key, { mode: 0o600 });
  writeFileSync(tls.certFile, issued.cert);
  writeFileSync(tls.caFile, issued.ca);
  return tls;
}

/** The CA and serving certificate `--xds-ca` / `--xds-server-name` ask for; undefined without `--xds-ca`. */
export async function xdsTlsOf(
  values: {
    readonly "xds-ca"?: string | undefined;
    readonly "xds-server-name"?: readonly string[] | undefined;
    readonly "xds-host": string;
  },
  log: (line: string) => void,
): Promise<{ readonly ca: CertificateAuthority; readonly tls: MutualTls } | undefined> {
  const dir = values["xds-ca"];
  if (dir === undefined) return undefined;
  const { ca, created } = await loadOrCreateCa(dir);
  log(
    `sluice: ${created ? "created a CA in" : "CA from"} ${dir} (ca.crt, ca.key); mutual TLS on ADS, ext_proc and ext_authz`,
  );
  return { ca, tls: await serverTls(ca, values["xds-host"], values["xds-server-name"] ?? []) };
}
