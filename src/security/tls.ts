// Mutual TLS as Sluice's servers take it: a serving certificate, and a CA whose client certificates are the only ones
// accepted (docs/xds-security.md).
import type { TlsOptions } from "node:tls";

/** PEM strings. */
export interface MutualTls {
  /** Sluice's serving certificate (with its chain, if any) and key. */
  readonly cert: string;
  readonly key: string;
  /** The CA certificate(s) a client's certificate must chain to; a client without one fails the handshake. */
  readonly ca: string;
}

/** node:tls server options: the client must present a certificate of the CA, checked in the handshake. */
export function mutualTlsServerOptions(t: MutualTls, alpn: readonly string[]): TlsOptions {
  return {
    cert: t.cert,
    key: t.key,
    ca: t.ca,
    requestCert: true,
    rejectUnauthorized: true,
    ALPNProtocols: [...alpn],
  };
}
