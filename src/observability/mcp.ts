// The MCP service's calls to its targets, traced: each call a client span under the span of the client request it
// serves (which is Envoy's child), named after the method. Its counters are src/mcp/metrics.ts's.

import { currentSpan } from "./context.js";
import { requestDebug } from "./log.js";
import { recordChildSpan } from "./trace.js";

/** One request to a target answered (or failed) after `ms`. */
export function observeMcpCall(backend: string, target: string, method: string, ok: boolean, ms: number): void {
  requestDebug("mcp", { backend, target, method, ok, ms: Math.round(ms) }, "mcp: target answered");
  const span = currentSpan();
  if (span === undefined) return;
  span.updateName(`mcp ${method}`);
  span.setAttribute("mcp.method.name", method);
  recordChildSpan(
    span,
    `mcp ${method} ${target}`,
    ms,
    { "mcp.method.name": method, "sluice.mcp.target": target, "sluice.mcp.backend": backend },
    !ok,
  );
}
