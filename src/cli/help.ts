// `sluice <command> --help`: what each command does, its options and an example to copy. The options of the
// long-running commands come from the option tables their parsers use, so a flag added there shows up here (a unit
// test fails until it has a sentence of its own).

import { CONTROLLER_OPTIONS } from "./controller-options.js";
import { XDS_MODE_OPTIONS } from "./envoy.js";
import { RATELIMIT_CONFIG_OPTIONS } from "./ratelimit-config.js";
import { SERVER_OPTIONS } from "./serve.js";

interface OptionSpec {
  readonly type: "string" | "boolean";
  readonly short?: string;
  readonly default?: string | boolean;
  readonly multiple?: boolean;
}

export interface CommandHelp {
  readonly summary: string;
  readonly usage: readonly string[];
  readonly about: string;
  /** Options the command's parser accepts, by long name. */
  readonly options: Readonly<Record<string, OptionSpec>>;
  readonly examples: readonly string[];
  readonly seeAlso?: string;
}

/** One sentence per option; an option of a command missing here is shown with its type alone (and fails a test). */
export const OPTION_TEXT: Readonly<Record<string, string>> = {
  file: "a YAML file or a directory read recursively; repeat for more (<file|dir>)",
  filename: "a YAML file or a directory read recursively; repeat for more (<file|dir>)",
  kubeconfig:
    'read the resources from a cluster: a kubeconfig path ("" uses $KUBECONFIG, ~/.kube/config or in-cluster)',
  "xds-host": "address the ADS, ext_authz and MCP servers bind",
  "xds-port": "ADS (xDS) port; 0 picks a free one",
  "authz-port": "Sluice's ext_authz / ext_proc gRPC port; 0 picks a free one",
  "mcp-port": "Sluice's MCP service port; 0 picks a free one",
  "admin-host": "address of the admin endpoint (/console, /status, /metrics, /healthz, /readyz)",
  "admin-port": "admin endpoint port; 0 picks a free one",
  "authorization-path":
    "auto (rules Envoy RBAC can express run in Envoy), sluice (all in Sluice's ext_authz) or sluice-grpc (the same, always over gRPC)",
  "no-vhds": "serve delta-xDS Envoys whole RouteConfigurations instead of virtual hosts over VHDS",
  "xds-ca":
    "directory with Sluice's CA (ca.crt, ca.key; created when absent): xDS and ext_authz then require client certificates",
  "xds-server-name": "another DNS name for Sluice's serving certificate (the name Envoys dial); repeatable",
  delta: "delta xDS (the default; kept for older scripts)",
  sotw: "state-of-the-world xDS instead of delta",
  "envoy-log-level": "log level of the Envoys `sluice run` starts (trace, debug, info, warn, error)",
  "log-level":
    "Sluice's log level, one for all modules then per module: info,xds=debug (default: $SLUICE_LOG_LEVEL, else info)",
  "log-format": "json, pretty or text (default: $SLUICE_LOG_FORMAT, else json in a cluster, pretty on a terminal)",
  "otlp-endpoint":
    "OTLP/HTTP endpoint for Sluice's spans, e.g. http://collector:4318/v1/traces (tracing is off without)",
  "otlp-service-name": "service.name of Sluice's spans (default: $OTEL_SERVICE_NAME, else sluice)",
  "request-metrics": "on or off: the request-path series on /metrics (ext_authz, LLM, guards, MCP)",
  namespace: "namespace of the Lease and the xDS CA Secret (default: the pod's own)",
  identity: "this replica's name in the Lease (default: the host name)",
  "lease-name": "name of the leader-election Lease",
  "lease-duration": "seconds a Lease holder keeps the lead without renewing",
  "leader-elect": "take part in leader election (the default)",
  "no-leader-elect": "act as the leader without a Lease (one replica only)",
  "status-concurrency": "status writes in flight at once",
  "no-xds-tls": "serve xDS in plaintext (authenticated xDS is the default in a cluster)",
  "no-provision": "do not create Envoy Deployments and Services for Gateways",
  "proxy-xds-host": "host provisioned Envoys dial for xDS (default sluice-xds.<namespace>.svc)",
  "proxy-xds-port": "xDS port provisioned Envoys dial (default: --xds-port)",
  "proxy-authz-port": "ext_authz port provisioned Envoys dial (default: --authz-port)",
  "proxy-mcp-port": "MCP port provisioned Envoys dial (default: --mcp-port)",
  "proxy-admin-port": "provisioned Envoy's admin port (loopback in its pod)",
  "proxy-ready-port": "provisioned Envoy's readiness port",
  "proxy-image": "Envoy image when no GwParameters names one",
  "proxy-log-level": "provisioned Envoy's log level when no GwParameters names one",
  "provision-resync": "seconds between re-applies of provisioned objects (drift correction); 0: only on changes",
  gateway: "the Gateway, as <namespace>/<name>",
  "node-id": "Envoy node id (default: derived from the Gateway)",
  "envoy-admin-port": "Envoy's admin port in the bootstrap",
  "tls-cert": "Envoy's client certificate for `sluice serve --xds-ca` (from `sluice certificate`)",
  "tls-key": "key of --tls-cert",
  "tls-ca": "CA of Sluice's serving certificate",
  "tls-server-name": "name Sluice's serving certificate must carry (default: --xds-host)",
  out: "directory to write tls.crt, tls.key and ca.crt into",
  output: "output format",
  "show-secrets": "print TLS private keys instead of redacting them",
  route: "the HTTPRoute, as <namespace>/<name>[/<rule name or index>] (namespace default when omitted)",
  admin: "URL of a running Sluice's admin endpoint, to add what each connected Envoy ACKed or NACKed",
  limit:
    "a limit of envoyproxy/ratelimit, <domain>/<entry>[/<entry>...]=<n>/<second|minute|hour|day|...>; repeat for more",
};

/** Per-command wording where the shared sentence would mislead. */
const OPTION_OVERRIDE: Readonly<Record<string, Readonly<Record<string, string>>>> = {
  translate: { output: "yaml or json", gateway: "print only this Gateway's xDS (<namespace>/<name>)" },
  validate: { output: "text or json" },
  explain: { output: "text or json (json has every value whole)" },
  status: { output: "yaml or json" },
  "ratelimit-config": { out: "directory to write one <domain>.yaml into (printed to stdout when absent)" },
  certificate: { "xds-ca": "the CA directory `sluice serve --xds-ca` uses (created when absent)" },
};

export const COMMAND_HELP: Readonly<Record<string, CommandHelp>> = {
  run: {
    summary: "serve -f <dir> and run Envoy for each Gateway in it (the embedded default)",
    usage: ["sluice run -f <file|dir> [options]"],
    about:
      "Watches the files, translates them and serves xDS, and starts one Envoy per Gateway (stopped when the Gateway leaves\nthe files). Edits reach Envoy without a restart; a file with errors keeps the last good configuration serving.\nThe web console is at http://<admin-host>:<admin-port>/console.",
    options: { ...SERVER_OPTIONS, ...XDS_MODE_OPTIONS, "envoy-log-level": { type: "string", default: "warn" } },
    examples: [
      "sluice run -f examples/quickstart            # then: curl http://127.0.0.1:8080/",
      "sluice run -f examples/api-keys --admin-port 18001   # console: http://127.0.0.1:18001/console",
    ],
    seeAlso: "examples/*/README.md, docs/",
  },
  controller: {
    summary: "watch a Kubernetes cluster (--kubeconfig, or in-cluster), serve xDS, write status (Lease holder)",
    usage: ["sluice controller [--kubeconfig <file>] [options]"],
    about:
      "Runs in a cluster (installed by deploy/helm/sluice): watches Gateway API and sluice.dev resources, serves xDS to\nthe Envoys it provisions, and writes status while it holds the Lease.",
    options: CONTROLLER_OPTIONS,
    examples: ["sluice controller --kubeconfig ~/.kube/config --no-provision --no-xds-tls"],
    seeAlso: "docs/kubernetes.md, examples/kubernetes/",
  },
  serve: {
    summary: "serve xDS (ADS) for the Gateways in -f <file|dir>, watching for changes",
    usage: ["sluice serve -f <file|dir> [options]"],
    about: "Like `sluice run` without starting Envoy: run your own Envoy with the bootstrap `sluice bootstrap` prints.",
    options: SERVER_OPTIONS,
    examples: [
      "sluice serve -f gateway.yaml &",
      "sluice bootstrap --gateway default/quickstart > envoy.yaml && envoy -c envoy.yaml",
    ],
  },
  bootstrap: {
    summary: "print the Envoy bootstrap for --gateway <ns>/<name> against `sluice serve`",
    usage: ["sluice bootstrap --gateway <namespace>/<name> [options]"],
    about: "Prints an Envoy bootstrap (YAML) that fetches the Gateway's configuration from `sluice serve`.",
    options: {
      gateway: { type: "string" },
      "node-id": { type: "string" },
      "xds-host": { type: "string", default: "127.0.0.1" },
      "xds-port": { type: "string", default: "18000" },
      "authz-port": { type: "string", default: "18002" },
      "mcp-port": { type: "string", default: "18003" },
      "envoy-admin-port": { type: "string", default: "19000" },
      "tls-cert": { type: "string" },
      "tls-key": { type: "string" },
      "tls-ca": { type: "string" },
      "tls-server-name": { type: "string" },
      ...XDS_MODE_OPTIONS,
    },
    examples: ["sluice bootstrap --gateway default/quickstart > envoy.yaml"],
  },
  certificate: {
    summary: "issue --gateway <ns>/<name>'s client certificate from the CA of `sluice serve --xds-ca <dir>`",
    usage: ["sluice certificate --xds-ca <dir> --gateway <namespace>/<name> --out <dir>"],
    about: "Writes the Envoy client certificate `sluice bootstrap --tls-cert/--tls-key` expects.",
    options: { "xds-ca": { type: "string" }, gateway: { type: "string" }, out: { type: "string" } },
    examples: ["sluice certificate --xds-ca ./ca --gateway default/web --out ./web-tls"],
  },
  "ratelimit-config": {
    summary: "write envoyproxy/ratelimit's config for the GwPolicies' global rate limits",
    usage: ["sluice ratelimit-config -f <file|dir> --limit <domain>/<entry>[/<entry>...]=<n>/<unit> ... [--out <dir>]"],
    about:
      "Writes one YAML file per rateLimit.global domain in envoyproxy/ratelimit's format: a nested descriptor per entry\nname (every distinct value counted apart), the innermost with the --limit given for it. Without --out, prints\nthem. Descriptors without a --limit are written without one and warned about. See docs/policies.md.",
    options: RATELIMIT_CONFIG_OPTIONS,
    examples: [
      "sluice ratelimit-config -f ./config --limit llm/user=100000/day --out /srv/runtime_data/current/ratelimit/config",
    ],
  },
  translate: {
    summary: "print the xDS that would be served for -f <file|dir>",
    usage: ["sluice translate -f <file|dir> [--gateway <namespace>/<name>] [--output yaml|json] [--show-secrets]"],
    about:
      "Prints the Envoy resources (listeners, routes, clusters, ...) per Gateway. Exit code 1 when a file has an error.",
    options: {
      file: { type: "string", short: "f", multiple: true },
      gateway: { type: "string" },
      output: { type: "string", short: "o", default: "yaml" },
      "show-secrets": { type: "boolean", default: false },
    },
    examples: ["sluice translate -f examples/quickstart --gateway default/quickstart -o json"],
  },
  validate: {
    summary: "check -f <file|dir> against the schemas; every problem as file:line: ...",
    usage: [
      "sluice validate -f <file|dir> [-f <file|dir> ...] [--output text|json]",
      "sluice validate --kubeconfig <file>",
    ],
    about:
      "Reports every problem as file:line: Kind ns/name: field.path: message. Exit code 0 without errors (warnings\nallowed), 1 with one, 2 for a usage error.",
    options: {
      filename: { type: "string", short: "f", multiple: true },
      kubeconfig: { type: "string" },
      output: { type: "string", default: "text" },
    },
    examples: ["sluice validate -f examples/"],
  },
  explain: {
    summary: "print the effective policy of --route <ns>/<name>[/<rule>] in -f <file|dir>",
    usage: [
      "sluice explain -f <file|dir> --route <namespace>/<name>[/<rule>] [--output text|json]",
      "sluice explain --kubeconfig <file> --route <namespace>/<name>[/<rule>]",
    ],
    about:
      "For each Gateway listener the route is served through and each rule: every policy field in effect, with the\nGwPolicy and level it came from; then what targets the route but is not applied, and why. An unknown route\nlists the routes there are.",
    options: {
      file: { type: "string", short: "f", multiple: true },
      kubeconfig: { type: "string" },
      route: { type: "string" },
      output: { type: "string", short: "o", default: "text" },
    },
    examples: ["sluice explain -f examples/jwt-cel --route default/api"],
  },
  status: {
    summary: "print resource status for -f <file|dir> (and --admin <url> xDS status)",
    usage: ["sluice status (-f <file|dir> | --kubeconfig <file>) [--admin <url>] [--output yaml|json]"],
    about:
      "Prints the status Sluice computes for each resource and the problems found loading them; with --admin, what each\nEnvoy connected to that Sluice ACKed, and its NACKs with Envoy's message. Exit code 1 when something is wrong.",
    options: {
      file: { type: "string", short: "f", multiple: true },
      kubeconfig: { type: "string" },
      admin: { type: "string" },
      output: { type: "string", short: "o", default: "yaml" },
    },
    examples: ["sluice status -f examples/quickstart --admin http://127.0.0.1:18001"],
  },
};

function optionText(command: string, name: string): string | undefined {
  return OPTION_OVERRIDE[command]?.[name] ?? OPTION_TEXT[name];
}

/** Long options of `command` that have no sentence (a unit test keeps this empty). */
export function undocumentedOptions(command: string): string[] {
  const c = COMMAND_HELP[command];
  return c === undefined ? [] : Object.keys(c.options).filter((o) => optionText(command, o) === undefined);
}

export function commandHelp(command: string): string | undefined {
  const c = COMMAND_HELP[command];
  if (c === undefined) return undefined;
  const rows = Object.entries(c.options).map(([name, spec]) => {
    const flag = `${spec.short !== undefined ? `-${spec.short}, ` : "    "}--${name}${spec.type === "string" ? " <value>" : ""}`;
    const dflt =
      spec.default !== undefined && spec.default !== false && spec.default !== ""
        ? ` (default: ${String(spec.default)})`
        : "";
    return [flag, `${optionText(command, name) ?? `(${spec.type})`}${dflt}`] as const;
  });
  rows.push(["-h, --help", "this help"]);
  const width = Math.min(32, Math.max(...rows.map(([f]) => f.length)));
  const lines = [
    `usage: ${c.usage[0]}`,
    ...c.usage.slice(1).map((u) => `       ${u}`),
    "",
    c.about,
    "",
    "options:",
    ...rows.map(([f, t]) => (f.length > width ? `  ${f}\n  ${" ".repeat(width)}  ${t}` : `  ${f.padEnd(width)}  ${t}`)),
    "",
    "examples:",
    ...c.examples.map((e) => `  ${e}`),
  ];
  if (c.seeAlso !== undefined) lines.push("", `see also: ${c.seeAlso}`);
  return `${lines.join("\n")}\n`;
}

/** Edit distance, for "did you mean" (names here are short). */
function distance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++)
      cur[j] = Math.min(
        (prev[j] ?? 0) + 1,
        (cur[j - 1] ?? 0) + 1,
        (prev[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
    prev = cur;
  }
  return prev[b.length] ?? 0;
}

/** The candidate closest to `word`, when close enough to be a likely typo (or a prefix of it). */
export function closest(word: string, candidates: Iterable<string>): string | undefined {
  let best: string | undefined;
  let bestD = Number.POSITIVE_INFINITY;
  for (const c of candidates) {
    const d = c.startsWith(word) && word.length >= 2 ? 0.5 : distance(word, c);
    if (d < bestD) {
      best = c;
      bestD = d;
    }
  }
  return best !== undefined && bestD <= Math.max(2, Math.floor(word.length / 3)) ? best : undefined;
}

/** A hint for a flag `command` does not know: the nearest one it does. */
export function unknownOptionHint(command: string, flag: string): string {
  const c = COMMAND_HELP[command];
  const name = flag.replace(/^-+/, "");
  const guess = c !== undefined ? closest(name, Object.keys(c.options)) : undefined;
  return guess !== undefined ? `did you mean --${guess}? ` : "";
}
