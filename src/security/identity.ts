// The identity of a Gateway's Envoys in their client certificates: one URI SAN in SPIFFE form,
// `spiffe://sluice.dev/ns/<namespace>/gateway/<name>`. The Gateway key (`<namespace>/<name>`) is also the Envoy's xDS
// node group (src/xds-server/node-group.ts), so the ADS server compares the two directly.

/** The trust domain of the identities Sluice's CA issues. */
export const TRUST_DOMAIN = "sluice.dev";

const PREFIX = `spiffe://${TRUST_DOMAIN}/ns/`;

/**
 * Characters SPIFFE allows in a path segment (letters, digits, `.`, `-`, `_`); Kubernetes names (DNS-1123) always fit.
 * `.` and `..` alone are not segments.
 */
const SEGMENT = /^(?!\.\.?$)[A-Za-z0-9._-]+$/;

/** The URI SAN naming Gateway `namespace/name`; throws when the key cannot be one (a caller's bug: keys come from
 * Kubernetes names or the file source's validated ones). */
export function gatewayIdentity(gatewayKey: string): string {
  const parts = gatewayKey.split("/");
  const [namespace, name] = parts;
  if (
    parts.length !== 2 ||
    namespace === undefined ||
    name === undefined ||
    !SEGMENT.test(namespace) ||
    !SEGMENT.test(name)
  )
    throw new Error(`not a Gateway key "<namespace>/<name>" of SPIFFE path characters: "${gatewayKey}"`);
  return `${PREFIX}${namespace}/gateway/${name}`;
}

/** The Gateway key (`namespace/name`) a URI SAN names, or undefined when it is not a Gateway identity. */
export function gatewayOfIdentity(uri: string): string | undefined {
  if (!uri.startsWith(PREFIX)) return undefined;
  const parts = uri.slice(PREFIX.length).split("/");
  if (parts.length !== 3 || parts[1] !== "gateway") return undefined;
  const [namespace, , name] = parts;
  if (namespace === undefined || name === undefined || !SEGMENT.test(namespace) || !SEGMENT.test(name))
    return undefined;
  return `${namespace}/${name}`;
}
