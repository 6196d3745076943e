// `sluice explain -f <file|dir> --route <ns>/<name>[/<rule>] [--output text|json]`: the effective policy of a route,
// per Gateway listener it is served through and per rule, field by field, each with the policy and level it came
// from; then what targets the route but does not apply, and why. What a user reads when a policy "does nothing".

import { parseArgs } from "node:util";
import type { HTTPRoute } from "../api/gateway-api.js";
import type { Resource } from "../api/resource.js";
import { namespaceOf } from "../api/resource.js";
import { formatProblem } from "../sources/file-source.js";
import type { EffectivePolicyIR, PolicyFieldIR, PolicySourceIR, PolicyValueIR } from "../translate/ir.js";
import type { RejectedTarget, RouteSite, SiteNotApplied } from "../translate/policy/engine.js";
import { closest } from "./help.js";
import type { CommandIO } from "./io.js";
import { loadAndTranslate, loadAndTranslateCluster } from "./load.js";

const USAGE =
  "usage: sluice explain (-f <file|dir> | --kubeconfig <file>) --route <namespace>/<name>[/<rule name or index>] [--output json]\n";
/** Values longer than this are cut in text output; `--output json` has them whole. */
const MAX_VALUE = 100;

interface RouteSelector {
  readonly namespace: string;
  readonly name: string;
  readonly rule?: string;
}

function parseRoute(s: string): RouteSelector | undefined {
  const parts = s.split("/");
  if (parts.length === 1 && parts[0] !== "") return { namespace: "default", name: parts[0] as string };
  if (parts.length < 2 || parts.length > 3 || parts.some((p) => p === "")) return undefined;
  const [namespace = "", name = "", rule] = parts;
  return { namespace, name, ...(rule !== undefined ? { rule } : {}) };
}

function describeSource(s: PolicySourceIR): string {
  return `${s.kind} ${s.name}  [${s.level}: ${s.target}]`;
}

function compact(v: unknown): string {
  const text = JSON.stringify(v) ?? "null";
  return text.length > MAX_VALUE ? `${text.slice(0, MAX_VALUE - 1)}…` : text;
}

function isCombined(f: PolicyFieldIR): f is { readonly combined: readonly PolicyValueIR[] } {
  return "combined" in f;
}

function policyLines(p: EffectivePolicyIR | undefined, indent: string): string[] {
  const entries = Object.entries(p ?? {});
  if (entries.length === 0) return [`${indent}(none)`];
  const width = Math.max(...entries.map(([k]) => k.length));
  const out: string[] = [];
  for (const [field, f] of entries) {
    if (isCombined(f)) {
      out.push(`${indent}${field.padEnd(width)}  ${f.combined.length} rule(s) combined:`);
      for (const r of f.combined) {
        out.push(`${indent}${" ".repeat(width)}  - ${compact(r.value)}`);
        out.push(`${indent}${" ".repeat(width)}      from ${describeSource(r.from)}`);
      }
    } else {
      out.push(`${indent}${field.padEnd(width)}  ${compact(f.value)}`);
      out.push(`${indent}${" ".repeat(width)}    from ${describeSource(f.from)}`);
    }
  }
  return out;
}

const SECTION_TITLE: Readonly<Record<SiteNotApplied["section"], string>> = {
  frontend: "frontend",
  preRouting: "pre-routing traffic",
  traffic: "traffic",
  backend: "backend",
};

function notAppliedLine(n: SiteNotApplied): string {
  const where = [SECTION_TITLE[n.section], n.backend, n.subBackend !== undefined ? `sub-backend ${n.subBackend}` : ""]
    .filter((x) => x !== undefined && x !== "")
    .join(", ");
  const what = n.field !== undefined ? `field ${n.field}` : "whole section";
  return `${n.from.kind} ${n.from.name} [${n.from.level}: ${n.from.target}] (${where}, ${what}): ${n.reason}`;
}

function siteText(site: RouteSite): string[] {
  const out: string[] = [];
  const rule = `rule ${site.rule}${site.ruleName !== undefined ? ` "${site.ruleName}"` : " (unnamed; name it to target it)"}`;
  out.push(`  ${rule}`);
  out.push("    pre-routing traffic policy (phase PreRouting):");
  out.push(...policyLines(site.policy.preRouting, "      "));
  out.push("    traffic policy (phase PostRouting):");
  out.push(...policyLines(site.policy.traffic, "      "));
  out.push("    backend policy:");
  const backends = site.policy.backends ?? [];
  if (backends.length === 0) out.push("      (none)");
  for (const b of backends) {
    out.push(`      ${b.backend} (cluster ${b.cluster}):`);
    out.push(...policyLines(b.policy, "        "));
    for (const sub of b.subBackends ?? []) {
      out.push(`        sub-backend ${sub.name}:`);
      out.push(...policyLines(sub.policy, "          "));
    }
  }
  if (site.notApplied.length > 0) {
    out.push("    not applied here:");
    for (const n of site.notApplied) out.push(`      - ${notAppliedLine(n)}`);
  }
  return out;
}

/** The HTTPRoutes there are, to pick from when the one asked for is not there (with the likeliest first). */
export function knownRoutesText(resources: readonly Resource[], asked: string, source: string): string {
  const keys = resources
    .filter((r) => r.kind === "HTTPRoute")
    .map((r) => `${namespaceOf(r)}/${r.metadata.name}`)
    .sort();
  if (keys.length === 0) return "There is no HTTPRoute there; explain reads HTTPRoutes (kind HTTPRoute).\n";
  const guess = closest(asked, keys);
  const lines = keys.map((k) => `  ${k}`);
  return `${guess !== undefined ? `Did you mean ${guess}? ` : ""}HTTPRoutes there:\n${lines.join("\n")}\ntry: sluice explain ${source} --route ${guess ?? keys[0]}\n`;
}

function ruleMatches(route: HTTPRoute, index: number, rule: string | undefined): boolean {
  if (rule === undefined) return true;
  return route.spec.rules?.[index]?.name === rule || String(index) === rule;
}

export async function runExplain(argv: string[], io: CommandIO): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      file: { type: "string", short: "f", multiple: true },
      kubeconfig: { type: "string" },
      route: { type: "string" },
      output: { type: "string", short: "o", default: "text" },
    },
  });
  const sel = values.route !== undefined ? parseRoute(values.route) : undefined;
  const fromCluster = values.kubeconfig !== undefined;
  if (values.route !== undefined && sel === undefined) {
    io.stderr(
      `sluice explain: --route "${values.route}" is not <namespace>/<name>[/<rule>] (for example default/api or default/api/0)\n${USAGE}`,
    );
    return 2;
  }
  if ((!values.file?.length && !fromCluster) || sel === undefined) {
    io.stderr(
      `sluice explain: -f <file|dir> (or --kubeconfig <file>) and --route <namespace>/<name>[/<rule>] are required\n${USAGE}`,
    );
    return 2;
  }
  if (values.output !== "text" && values.output !== "json") {
    io.stderr(`sluice explain: --output must be text or json\n${USAGE}`);
    return 2;
  }
  const { load, result } =
    values.kubeconfig !== undefined
      ? await loadAndTranslateCluster(values.kubeconfig, (l) => io.stderr(`${l}\n`))
      : await loadAndTranslate(values.file ?? []);
  for (const p of load.problems) io.stderr(`${formatProblem(p)}\n`);

  const key = `${sel.namespace}/${sel.name}`;
  const route = load.resources.find(
    (r): r is HTTPRoute => r.kind === "HTTPRoute" && namespaceOf(r) === sel.namespace && r.metadata.name === sel.name,
  );
  if (route === undefined) {
    const where = values.kubeconfig !== undefined ? "the cluster" : (values.file ?? []).join(", ");
    const source =
      values.kubeconfig !== undefined
        ? `--kubeconfig ${values.kubeconfig || '""'}`
        : (values.file ?? []).map((f) => `-f ${f}`).join(" ");
    io.stderr(
      `sluice explain: HTTPRoute ${key} not found in ${where}\n${knownRoutesText(load.resources, key, source)}`,
    );
    return 1;
  }
  const rules = route.spec.rules ?? [];
  if (sel.rule !== undefined && !rules.some((_, i) => ruleMatches(route, i, sel.rule))) {
    const names = rules.map((r, i) => (r.name !== undefined ? `${i} (${r.name})` : String(i))).join(", ");
    io.stderr(`sluice explain: HTTPRoute ${key} has no rule ${sel.rule}; its rules: ${names || "none"}\n`);
    return 1;
  }

  const str = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
  // Grouped by where the route is served, then by rule: the order a reader follows a request in.
  const sites = result.policies.routes
    .filter((s) => s.route === key && ruleMatches(route, s.rule, sel.rule))
    .sort((a, b) => str(a.gateway, b.gateway) || a.port - b.port || str(a.listener, b.listener) || a.rule - b.rule);
  const rejected: RejectedTarget[] = result.policies.rejected.filter(
    (r) =>
      r.targetRef.kind === "HTTPRoute" &&
      r.targetRef.namespace === sel.namespace &&
      r.targetRef.name === sel.name &&
      (sel.rule === undefined || r.targetRef.sectionName === undefined || r.targetRef.sectionName === sel.rule),
  );
  const routeStatus = result.statuses.find(
    (s) => s.kind === "HTTPRoute" && s.namespace === sel.namespace && s.name === sel.name,
  )?.status;

  if (values.output === "json") {
    const doc = { route: key, ...(sel.rule !== undefined ? { rule: sel.rule } : {}), sites, rejected, routeStatus };
    io.stdout(`${JSON.stringify(doc, null, 2)}\n`);
    return 0;
  }

  const out: string[] = [`HTTPRoute ${key}${sel.rule !== undefined ? `, rule ${sel.rule}` : ""}`];
  if (sites.length === 0) {
    out.push("", "Not served by any Gateway of Sluice, so no policy applies. Route status:");
    out.push(`  ${JSON.stringify(routeStatus ?? "none (no parentRef names a Gateway served by Sluice)")}`);
  }
  let last = "";
  for (const site of sites) {
    const header = `Gateway ${site.gateway}, listener ${site.listener} (port ${site.port})`;
    if (header !== last) out.push("", header);
    last = header;
    out.push(...siteText(site));
  }
  out.push("", "Policies targeting this route that are not attached:");
  if (rejected.length === 0) out.push("  (none)");
  for (const r of rejected) out.push(`  - GwPolicy ${r.policy}: ${r.reason}: ${r.message}`);
  io.stdout(`${out.join("\n")}\n`);
  return 0;
}
