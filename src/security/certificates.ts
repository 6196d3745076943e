// The CA Sluice keeps for authenticated xDS and services, and the certificates it issues: its own serving certificate
// and one client certificate per Gateway, naming the Gateway in a URI SAN (./identity.ts). ECDSA P-256 with SHA-256
// throughout; everything in and out is PEM (PKCS#8 keys), so a caller can keep it in files or a Kubernetes Secret.
// Nothing here knows where it is kept. docs/xds-security.md describes the scheme.

// @peculiar/x509's dependency injection (tsyringe) needs the Reflect metadata API, which Node lacks: load it first.
import "reflect-metadata";
import { createPrivateKey, createPublicKey, webcrypto } from "node:crypto";
import {
  AuthorityKeyIdentifierExtension,
  BasicConstraintsExtension,
  ExtendedKeyUsage,
  ExtendedKeyUsageExtension,
  type JsonGeneralName,
  KeyUsageFlags,
  KeyUsagesExtension,
  PemConverter,
  SubjectAlternativeNameExtension,
  SubjectKeyIdentifierExtension,
  X509Certificate,
  X509CertificateGenerator,
} from "@peculiar/x509";
import { gatewayIdentity, gatewayOfIdentity } from "./identity.js";

/** A certificate and its private key, PEM. */
export interface PemPair {
  readonly cert: string;
  readonly key: string;
}

/** Sluice's CA: kept as `ca.crt` / `ca.key` (a directory for `sluice serve --xds-ca`, a Secret in a cluster). */
export type CertificateAuthority = PemPair;

/** An issued certificate, its key, and the CA certificate that verifies it and its peers (`tls.crt`, `tls.key`, `ca.crt`). */
export interface IssuedCertificate extends PemPair {
  readonly ca: string;
  readonly notBefore: Date;
  readonly notAfter: Date;
}

export interface ValidityOptions {
  /** The time of issue (default: now); tests issue certificates already expired or not valid yet. */
  readonly now?: Date;
  /** Lifetime in days (default: 3650 for the CA, 365 for what it issues). */
  readonly days?: number;
}

export const CA_NAME = "CN=Sluice xDS and services CA,O=sluice.dev";
const CA_DAYS = 3650;
const LEAF_DAYS = 365;
/** Certificates start a little in the past, so a peer whose clock is behind ours accepts them at once. */
const BACKDATE_MS = 5 * 60_000;
const DAY_MS = 86_400_000;

const EC_KEY = { name: "ECDSA", namedCurve: "P-256" } as const;
const SIGNING = { name: "ECDSA", hash: "SHA-256" } as const;

function validity(o: ValidityOptions, defaultDays: number): { notBefore: Date; notAfter: Date } {
  // Whole seconds: what a certificate holds, so the dates returned are the certificate's.
  const now = Math.floor((o.now ?? new Date()).getTime() / 1000) * 1000;
  return { notBefore: new Date(now - BACKDATE_MS), notAfter: new Date(now + (o.days ?? defaultDays) * DAY_MS) };
}

async function newKeys(): Promise<webcrypto.CryptoKeyPair> {
  return (await webcrypto.subtle.generateKey(EC_KEY, true, ["sign", "verify"])) as webcrypto.CryptoKeyPair;
}

async function keyPem(key: webcrypto.CryptoKey): Promise<string> {
  return `${PemConverter.encode(await webcrypto.subtle.exportKey("pkcs8", key), "PRIVATE KEY")}\n`;
}

function certPem(cert: X509Certificate): string {
  return `${cert.toString("pem")}\n`;
}

/** A new CA: self-signed, may sign end-entity certificates only (path length 0). */
export async function createCa(o: ValidityOptions & { readonly name?: string } = {}): Promise<CertificateAuthority> {
  const keys = await newKeys();
  const cert = await X509CertificateGenerator.createSelfSigned({
    name: o.name ?? CA_NAME,
    keys,
    signingAlgorithm: SIGNING,
    ...validity(o, CA_DAYS),
    extensions: [
      new BasicConstraintsExtension(true, 0, true),
      new KeyUsagesExtension(KeyUsageFlags.keyCertSign | KeyUsageFlags.cRLSign, true),
      await SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return { cert: certPem(cert), key: await keyPem(keys.privateKey) };
}

/**
 * The certificate of `ca.cert` that `ca.key` belongs to: while a CA is replaced, `ca.cert` is a bundle of the old and
 * the new CA, and only one of them is the issuer of what this key signs.
 */
function signingCertificate(ca: CertificateAuthority): X509Certificate {
  const spki = createPublicKey(createPrivateKey(ca.key)).export({ type: "spki", format: "der" });
  const match = caBundle(ca.cert).find((c) => spki.equals(Buffer.from(c.publicKey.rawData)));
  if (match === undefined) throw new Error("the CA's key belongs to none of its certificates (ca.key, ca.crt)");
  return match;
}

async function issue(
  ca: CertificateAuthority,
  subject: string,
  names: JsonGeneralName[],
  usage: ExtendedKeyUsage,
  o: ValidityOptions,
): Promise<IssuedCertificate> {
  const caCert = signingCertificate(ca);
  const caKey = await webcrypto.subtle.importKey("pkcs8", PemConverter.decodeFirst(ca.key), EC_KEY, false, ["sign"]);
  const keys = await newKeys();
  const { notBefore, notAfter } = validity(o, LEAF_DAYS);
  const cert = await X509CertificateGenerator.create({
    subject,
    issuer: caCert.subject,
    publicKey: keys.publicKey,
    signingKey: caKey,
    signingAlgorithm: SIGNING,
    notBefore,
    notAfter,
    extensions: [
      new BasicConstraintsExtension(false, undefined, true),
      new KeyUsagesExtension(KeyUsageFlags.digitalSignature, true),
      new ExtendedKeyUsageExtension([usage]),
      new SubjectAlternativeNameExtension(names),
      await SubjectKeyIdentifierExtension.create(keys.publicKey),
      await AuthorityKeyIdentifierExtension.create(caCert.publicKey),
    ],
  });
  return { cert: certPem(cert), key: await keyPem(keys.privateKey), ca: ca.cert, notBefore, notAfter };
}

/** Sluice's serving certificate (server authentication only) for the names Envoys reach it by. */
export async function issueServerCertificate(
  ca: CertificateAuthority,
  names: { readonly dnsNames?: readonly string[]; readonly ipAddresses?: readonly string[] },
  o: ValidityOptions = {},
): Promise<IssuedCertificate> {
  const dns = names.dnsNames ?? [];
  const ips = names.ipAddresses ?? [];
  if (dns.length + ips.length === 0) throw new Error("a server certificate needs at least one DNS name or IP address");
  const san: JsonGeneralName[] = [
    ...dns.map((value) => ({ type: "dns" as const, value })),
    ...ips.map((value) => ({ type: "ip" as const, value })),
  ];
  return issue(ca, `CN=${dns[0] ?? ips[0]},O=sluice.dev`, san, ExtendedKeyUsage.serverAuth, o);
}

/**
 * A client certificate (client authentication only) for the Envoys of Gateway `gatewayKey` (`namespace/name`), whose
 * one URI SAN is the Gateway's identity (gatewayIdentity).
 */
export async function issueGatewayCertificate(
  ca: CertificateAuthority,
  gatewayKey: string,
  o: ValidityOptions = {},
): Promise<IssuedCertificate> {
  const uri = gatewayIdentity(gatewayKey);
  const [namespace, name] = gatewayKey.split("/");
  return issue(
    ca,
    `CN=${name},OU=${namespace},O=sluice.dev Gateway`,
    [{ type: "url", value: uri }],
    ExtendedKeyUsage.clientAuth,
    o,
  );
}

function parse(pemOrDer: string | Uint8Array): X509Certificate | undefined {
  try {
    return new X509Certificate(typeof pemOrDer === "string" ? pemOrDer : new Uint8Array(pemOrDer));
  } catch {
    return undefined;
  }
}

/** Every certificate of a PEM bundle (a `ca.crt` holds the old and the new CA while a CA is replaced). */
function caBundle(pem: string): X509Certificate[] {
  try {
    return PemConverter.decode(pem).flatMap((der) => parse(new Uint8Array(der)) ?? []);
  } catch {
    return [];
  }
}

/**
 * The Gateway (`namespace/name`) a certificate names, or undefined: none, several, or not a certificate. Reads the
 * names only; that the certificate is trusted is the TLS handshake's job (or checkGatewayCertificate's).
 */
export function gatewayOfCertificate(pemOrDer: string | Uint8Array): string | undefined {
  const cert = parse(pemOrDer);
  if (cert === undefined) return undefined;
  let san: SubjectAlternativeNameExtension | null;
  try {
    san = cert.getExtension(SubjectAlternativeNameExtension);
  } catch {
    // A SAN with name forms the library cannot read (otherName, X.400): not ours.
    return undefined;
  }
  const gateways = new Set<string>();
  for (const n of san?.names.items ?? []) {
    if (n.type !== "url") continue;
    const g = gatewayOfIdentity(n.value);
    if (g !== undefined) gateways.add(g);
  }
  return gateways.size === 1 ? [...gateways][0] : undefined;
}

export type CertificateProblem =
  | "malformed"
  | "other-ca"
  | "not-yet-valid"
  | "expired"
  | "not-a-client-certificate"
  | "no-gateway"
  | "wrong-gateway";

export type CertificateCheck =
  | { readonly ok: true; readonly gateway: string; readonly notAfter: Date; readonly renewalDue: boolean }
  | { readonly ok: false; readonly problem: CertificateProblem; readonly message: string };

/**
 * Whether `cert` is a Gateway client certificate that `caCert` signed, valid at `now`, naming `gateway` when given;
 * with `renewalDue` once less than a third of its lifetime is left (re-issue it then: see docs/xds-security.md). What
 * a controller runs over the certificates it stored, and the checks the TLS handshake makes, in words.
 */
export async function checkGatewayCertificate(
  caCert: string,
  cert: string,
  o: { readonly gateway?: string; readonly now?: Date } = {},
): Promise<CertificateCheck> {
  const cas = caBundle(caCert);
  const c = parse(cert);
  if (cas.length === 0 || c === undefined)
    return { ok: false, problem: "malformed", message: "not a PEM or DER certificate" };
  let signed = false;
  for (const ca of cas) {
    try {
      signed ||= c.issuer === ca.subject && (await c.verify({ publicKey: ca.publicKey, signatureOnly: true }));
    } catch {
      // A CA whose key type the signature does not fit: not the signer.
    }
  }
  if (!signed)
    return {
      ok: false,
      problem: "other-ca",
      message: `not signed by ${cas.map((ca) => `"${ca.subject}"`).join(" or ")}`,
    };
  const now = o.now ?? new Date();
  if (now < c.notBefore)
    return { ok: false, problem: "not-yet-valid", message: `valid from ${c.notBefore.toISOString()}` };
  if (now > c.notAfter) return { ok: false, problem: "expired", message: `expired at ${c.notAfter.toISOString()}` };
  const eku = c.getExtension(ExtendedKeyUsageExtension);
  if (eku === null || !eku.usages.includes(ExtendedKeyUsage.clientAuth))
    return { ok: false, problem: "not-a-client-certificate", message: "no clientAuth extended key usage" };
  const gateway = gatewayOfCertificate(new Uint8Array(c.rawData));
  if (gateway === undefined)
    return { ok: false, problem: "no-gateway", message: "no URI SAN naming one Gateway (spiffe://sluice.dev/ns/…)" };
  if (o.gateway !== undefined && gateway !== o.gateway)
    return { ok: false, problem: "wrong-gateway", message: `names Gateway ${gateway}, not ${o.gateway}` };
  const lifetime = c.notAfter.getTime() - c.notBefore.getTime();
  return {
    ok: true,
    gateway,
    notAfter: c.notAfter,
    renewalDue: c.notAfter.getTime() - now.getTime() < lifetime / 3,
  };
}
