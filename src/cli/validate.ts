// `sluice validate -f <file|dir> [-f ...] [--output text|json]`: every problem of every document, each as
// `file:line: Kind ns/name: spec.path: message`. Exit code 0 when there is no error (warnings allowed), 1 otherwise,
// 2 for a usage error.

import { readFile } from "node:fs/promises";
import { type Problem, splitPath } from "../api/problems.js";
import { validateResource } from "../api/validate.js";
import { listYamlFiles } from "../sources/files.js";
import { parseYamlFile } from "../sources/yaml.js";

export interface CliIO {
  readonly stdout: (s: string) => void;
  readonly stderr: (s: string) => void;
}

export interface ReportedProblem {
  readonly file: string;
  readonly line: number;
  /** `Kind ns/name`; empty for problems of a whole file (YAML syntax, unreadable file). */
  readonly resource: string;
  readonly path: string;
  readonly message: string;
  readonly severity: Problem["severity"];
}

export interface ValidateReport {
  readonly documents: number;
  readonly valid: number;
  readonly problems: readonly ReportedProblem[];
}

const USAGE = `usage: sluice validate -f <file|dir> [-f <file|dir> ...] [--output text|json]

Validates GwPolicy, GwBackend, GwModel, GwParameters and the Gateway API and core resources in YAML files
(directories are read recursively) and reports every problem as file:line: Kind ns/name: field.path: message.
Exit code: 0 when there is no error (warnings allowed), 1 when there is one, 2 for a usage error.
`;

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function label(doc: unknown): string {
  if (!isRecord(doc)) return "document";
  const kind = typeof doc["kind"] === "string" && doc["kind"] !== "" ? doc["kind"] : "(no kind)";
  const meta = isRecord(doc["metadata"]) ? doc["metadata"] : {};
  const name = typeof meta["name"] === "string" && meta["name"] !== "" ? meta["name"] : "(no name)";
  const ns = typeof meta["namespace"] === "string" && meta["namespace"] !== "" ? meta["namespace"] : "default";
  return `${kind} ${ns}/${name}`;
}

/** Validates the YAML files under `paths`; the report lists problems in file, then document, then field order. */
export async function validatePaths(paths: readonly string[]): Promise<ValidateReport> {
  const problems: ReportedProblem[] = [];
  let documents = 0;
  let valid = 0;
  const seen = new Map<string, string>();
  for (const path of paths) {
    let files: string[];
    try {
      files = await listYamlFiles(path);
    } catch (e) {
      problems.push({ file: path, line: 0, resource: "", path: "", message: errorText(e), severity: "error" });
      continue;
    }
    for (const file of files) {
      let text: string;
      try {
        text = await readFile(file, "utf8");
      } catch (e) {
        problems.push({ file, line: 0, resource: "", path: "", message: errorText(e), severity: "error" });
        continue;
      }
      const parsed = parseYamlFile(file, text);
      for (const p of parsed.problems) {
        problems.push({ file, line: p.line, resource: "", path: "", message: p.message, severity: "error" });
      }
      for (const doc of parsed.documents) {
        documents++;
        const result = validateResource(doc.value);
        const resource = label(doc.value);
        for (const p of result.problems) {
          const line = doc.source.lineOf?.(splitPath(p.path)) ?? doc.source.line;
          problems.push({ file, line, resource, path: p.path, message: p.message, severity: p.severity });
        }
        if (result.resource === undefined) continue;
        const key = `${result.resource.kind}/${resource}`;
        const first = seen.get(key);
        if (first !== undefined) {
          problems.push({
            file,
            line: doc.source.line,
            resource,
            path: "",
            message: `defined twice; first at ${first}`,
            severity: "error",
          });
          continue;
        }
        seen.set(key, `${file}:${doc.source.line}`);
        valid++;
      }
    }
  }
  return { documents, valid, problems };
}

function errorText(e: unknown): string {
  if (isRecord(e) && e["code"] === "ENOENT") return "no such file or directory";
  return e instanceof Error ? e.message : String(e);
}

export function formatProblem(p: ReportedProblem): string {
  const parts = [`${p.file}:${p.line}`];
  if (p.resource !== "") parts.push(p.resource);
  if (p.path !== "") parts.push(p.path);
  parts.push(p.severity === "warning" ? `warning: ${p.message}` : p.message);
  return parts.join(": ");
}

export async function runValidate(argv: string[], io: CliIO): Promise<number> {
  const paths: string[] = [];
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
    } else if (flag === "-o" || flag === "--output") {
      const v = value();
      if (v !== "text" && v !== "json") return usage(io, `${flag} must be text or json`);
      output = v;
    } else {
      return usage(io, `unknown argument ${JSON.stringify(arg)}`);
    }
  }
  if (paths.length === 0) return usage(io, "at least one -f <file|dir> is required");
  const report = await validatePaths(paths);
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

function usage(io: CliIO, message: string): number {
  io.stderr(`sluice validate: ${message}\n\n${USAGE}`);
  return 2;
}
