// `sluice validate -f <file|dir> [-f ...] [--output text|json]`: every problem of every document, each as
// `file:line: Kind ns/name: spec.path: message`. Exit code 0 when there is no error (warnings allowed), 1 otherwise,
// 2 for a usage error.

import {
  FileSource,
  formatProblem as formatSourceProblem,
  type LoadResult,
  type SourceProblem,
} from "../sources/file-source.js";
import type { CommandIO } from "./io.js";
import { loadCluster } from "./load.js";

/** A problem as `sluice validate` reports it: `resource` is empty for problems of a whole file. */
export interface ReportedProblem {
  readonly file: string;
  readonly line: number;
  readonly resource: string;
  readonly path: string;
  readonly message: string;
  readonly severity: SourceProblem["severity"];
}

export interface ValidateReport {
  readonly documents: number;
  readonly valid: number;
  readonly problems: readonly ReportedProblem[];
}

const USAGE = `usage: sluice validate -f <file|dir> [-f <file|dir> ...] [--output text|json]
       sluice validate --kubeconfig <file> [--output text|json]

Validates GwPolicy, GwBackend, GwModel, GwParameters and the Gateway API and core resources in YAML files
(directories are read recursively) and reports every problem as file:line: Kind ns/name: field.path: message.
With --kubeconfig, the objects of those kinds in the cluster are validated instead (a path of "" uses $KUBECONFIG,
~/.kube/config or the in-cluster config); problems are then named kubernetes: Kind ns/name: field.path: message.
Exit code: 0 when there is no error (warnings allowed), 1 when there is one, 2 for a usage error.
`;

/** Validates the YAML files under `paths` exactly as `sluice serve` loads them (one FileSource, no last-good). */
export async function validatePaths(paths: readonly string[]): Promise<ValidateReport> {
  return reportOf(await new FileSource(paths).load());
}

function reportOf(load: LoadResult): ValidateReport {
  return {
    documents: load.documents,
    valid: load.resources.length,
    problems: load.problems.map((p) => ({
      file: p.file,
      line: p.line,
      resource: p.resource ?? "",
      path: p.path,
      message: p.message,
      severity: p.severity,
    })),
  };
}

export function formatProblem(p: ReportedProblem): string {
  return formatSourceProblem({ ...p, ...(p.resource === "" ? { resource: undefined } : {}) } as SourceProblem);
}

export async function runValidate(argv: string[], io: CommandIO): Promise<number> {
  const paths: string[] = [];
  let kubeconfig: string | undefined;
  let output = "text";
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const eq = arg.indexOf("=");
    const [flag, inline] = arg.startsWith("--") && eq > 0 ? [arg.slice(0, eq), arg.slice(eq + 1)] : [arg, undefined];
    const value = (): string | undefined => inline ?? argv[++i];
    if (flag === "-h" || flag === "--help") {
      io.stdout(USAGE);
      return 0;
    } else if (flag === "-f" || flag === "--filename") {
      const v = value();
      if (v === undefined || v === "") return usage(io, `${flag} needs a file or directory`);
      paths.push(v);
    } else if (flag === "--kubeconfig") {
      const v = value();
      if (v === undefined) return usage(io, `${flag} needs a kubeconfig file ("" for the default)`);
      kubeconfig = v;
    } else if (flag === "-o" || flag === "--output") {
      const v = value();
      if (v !== "text" && v !== "json") return usage(io, `${flag} must be text or json`);
      output = v;
    } else {
      return usage(io, `unknown argument ${JSON.stringify(arg)}`);
    }
  }
  if (paths.length === 0 && kubeconfig === undefined)
    return usage(io, "at least one -f <file|dir>, or --kubeconfig, is required");
  if (paths.length > 0 && kubeconfig !== undefined) return usage(io, "give -f or --kubeconfig, not both");
  const report =
    kubeconfig !== undefined
      ? reportOf(await loadCluster(kubeconfig, (l) => io.stderr(`${l}\n`)))
      : await validatePaths(paths);
  const errors = report.problems.filter((p) => p.severity === "error").length;
  const warnings = report.problems.length - errors;
  if (output === "json") {
    io.stdout(`${JSON.stringify({ ...report, errors, warnings }, null, 2)}\n`);
  } else {
    for (const p of report.problems) io.stdout(`${formatProblem(p)}\n`);
    io.stderr(
      `${report.documents} document${report.documents === 1 ? "" : "s"}: ${report.valid} valid, ` +
        `${errors} error${errors === 1 ? "" : "s"}, ${warnings} warning${warnings === 1 ? "" : "s"}\n`,
    );
  }
  return errors > 0 ? 1 : 0;
}

function usage(io: CommandIO, message: string): number {
  io.stderr(`sluice validate: ${message}\n\n${USAGE}`);
  return 2;
}
