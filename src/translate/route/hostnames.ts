// Hostname intersection between a Gateway listener and an HTTPRoute, as Gateway API defines it.

/** True when `host` (exact or `*.suffix`) is covered by `pattern` (exact or `*.suffix`). */
function covers(pattern: string, host: string): boolean {
  if (pattern === host) return true;
  if (!pattern.startsWith("*.")) return false;
  const suffix = pattern.slice(1); // ".example.com"
  if (host.startsWith("*.")) return host.slice(1).endsWith(suffix) && host.length > pattern.length;
  return host.endsWith(suffix) && host.length > suffix.length;
}

/**
 * The hostnames a route serves on a listener: the route's hostnames narrowed to the listener's, or the listener's
 * hostname (or `*`) when the route names none. An empty result means the route does not attach to this listener.
 */
export function intersectHostnames(listener: string | undefined, route: readonly string[] | undefined): string[] {
  const routeHosts = (route ?? []).map((h) => h.toLowerCase());
  const l = listener?.toLowerCase();
  if (routeHosts.length === 0) return [l ?? "*"];
  if (l === undefined) return [...new Set(routeHosts)];
  const out = new Set<string>();
  for (const h of routeHosts) {
    if (covers(l, h)) out.add(h);
    else if (covers(h, l)) out.add(l);
  }
  return [...out];
}
