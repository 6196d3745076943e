// The file source: YAML files or directories, validated, with "last good" semantics, watched for changes.
//
// - A file with a YAML syntax error keeps contributing the documents it had when it last parsed.
// - A resource that fails validation is left out, except that the last valid version of the same resource
//   (kind/namespace/name) keeps being served while the new one is broken.
// - Every problem names file, line, resource and field path.

import { type FSWatcher, watch } from "node:fs";
import { readFile, stat } from "node:fs/promises";
import { dirname } from "node:path";
import { type Problem, splitPath } from "../api/problems.js";
import { describeResource, type Resource, resourceKey, type SourceRef } from "../api/resource.js";
import { type ValidationResult, validateResource } from "../api/validate.js";
import type { InvalidResource } from "../translate/input.js";
import { listYamlFiles } from "./files.js";
import { type LoadedDocument, parseYamlFile } from "./yaml.js";

export interface SourceProblem {
  readonly file: string;
  readonly line: number;
  /** `Kind ns/name`, when the problem belongs to a resource. */
  readonly resource?: string;
  readonly path: string;
  readonly message: string;
  readonly severity: "error" | "warning";
  /** What serving does about it, e.g. `resource left out`; printed in parentheses (not by `sluice validate`). */
  readonly consequence?: string;
}

export interface LoadResult {
  /** Documents read (before validation). */
  readonly documents: number;
  readonly resources: readonly Resource[];
  readonly sources: ReadonlyMap<string, SourceRef>;
  readonly problems: readonly SourceProblem[];
  /** Documents left out for failing validation (with a kind and a name), for status. */
  readonly invalid: readonly InvalidResource[];
}

/** `file:line: Kind ns/name: spec.path: message`, the format every command prints. */
export function formatProblem(p: SourceProblem): string {
  const parts = [`${p.file}:${p.line}`];
  if (p.resource !== undefined) parts.push(p.resource);
  if (p.path !== "") parts.push(p.path);
  parts.push(p.severity === "warning" ? `warning: ${p.message}` : p.message);
  return parts.join(": ") + (p.consequence !== undefined ? ` (${p.consequence})` : "");
}

function guessDescription(doc: unknown): string | undefined {
  if (typeof doc !== "object" || doc === null) return undefined;
  const d = doc as { kind?: unknown; metadata?: { name?: unknown; namespace?: unknown } };
  if (typeof d.kind !== "string" || typeof d.metadata?.name !== "string") return undefined;
  const ns = typeof d.metadata.namespace === "string" ? d.metadata.namespace : "default";
  return `${d.kind} ${ns}/${d.metadata.name}`;
}

function toSourceProblem(doc: LoadedDocument, p: Problem): SourceProblem {
  const line = doc.source.lineOf?.(splitPath(p.path)) ?? doc.source.line;
  const resource = guessDescription(doc.value);
  return {
    file: doc.source.file,
    line,
    ...(resource !== undefined ? { resource } : {}),
    path: p.path,
    message: p.message,
    severity: p.severity,
  };
}

/** JSON of a parsed document that tells apart what JSON alone would not (`.nan`, `.inf` and `-0` print as null/0). */
function contentKey(value: unknown): string {
  return JSON.stringify(value, (_, v: unknown) =>
    typeof v === "number" && (!Number.isFinite(v) || Object.is(v, -0))
      ? `\u0000number:${Object.is(v, -0) ? "-0" : v}`
      : v,
  );
}

function readError(e: unknown): string {
  return (e as { code?: string }).code === "ENOENT"
    ? "no such file or directory"
    : `cannot read: ${(e as Error).message}`;
}

export class FileSource {
  readonly #paths: readonly string[];
  /** Last documents of each file that parsed without syntax errors. */
  readonly #goodDocs = new Map<string, readonly LoadedDocument[]>();
  /** Last valid version of each resource, kept while a newer version is invalid. */
  readonly #goodResources = new Map<string, { resource: Resource; source: SourceRef }>();
  readonly #watchers: FSWatcher[] = [];
  /** Last text and parse of each file: an unchanged file is not parsed again. */
  readonly #parsed = new Map<string, { text: string; parsed: ReturnType<typeof parseYamlFile> }>();
  /** Validation of each parsed document, so unchanged documents are validated once and keep their identity. */
  readonly #validated = new WeakMap<LoadedDocument, ValidationResult>();
  /**
   * Validation by document content, per file: when one document of a file changes, the others keep their validated
   * resource objects (same identity), which is what lets the translator's memo skip them.
   */
  readonly #byContent = new Map<string, Map<string, ValidationResult>>();

  constructor(paths: readonly string[]) {
    this.#paths = paths;
  }

  async load(): Promise<LoadResult> {
    const problems: SourceProblem[] = [];
    const files: string[] = [];
    for (const p of this.#paths) {
      try {
        files.push(...(await listYamlFiles(p)));
      } catch (e) {
        problems.push({ file: p, line: 0, path: "", message: readError(e), severity: "error" });
      }
    }
    const documents: LoadedDocument[] = [];
    for (const file of files) {
      let text: string;
      try {
        text = await readFile(file, "utf8");
      } catch (e) {
        problems.push({ file, line: 0, path: "", message: readError(e), severity: "error" });
        continue;
      }
      const cached = this.#parsed.get(file);
      const parsed = cached?.text === text ? cached.parsed : parseYamlFile(file, text);
      if (parsed !== cached?.parsed && parsed.problems.length === 0) this.#validateFile(file, parsed.documents);
      this.#parsed.set(file, { text, parsed });
      if (parsed.problems.length > 0) {
        const kept = this.#goodDocs.get(file);
        for (const p of parsed.problems) {
          problems.push({
            file,
            line: p.line,
            path: "",
            message: `YAML syntax error: ${p.message}`,
            severity: "error",
            ...(kept ? { consequence: "this file's last valid contents keep serving" } : {}),
          });
        }
        documents.push(...(kept ?? []));
        continue;
      }
      this.#goodDocs.set(file, parsed.documents);
      documents.push(...parsed.documents);
    }
    const present = new Set(files);
    for (const file of [...this.#goodDocs.keys()]) if (!present.has(file)) this.#goodDocs.delete(file);
    for (const file of [...this.#parsed.keys()]) if (!present.has(file)) this.#parsed.delete(file);
    for (const file of [...this.#byContent.keys()]) if (!present.has(file)) this.#byContent.delete(file);

    const resources = new Map<string, { resource: Resource; source: SourceRef }>();
    const invalid: InvalidResource[] = [];
    for (const doc of documents) {
      let result = this.#validated.get(doc);
      if (result === undefined) {
        result = validateResource(doc.value);
        this.#validated.set(doc, result);
      }
      const docProblems = result.problems.map((p) => toSourceProblem(doc, p));
      const key = result.resource !== undefined ? resourceKey(result.resource) : undefined;
      if (result.resource !== undefined && key !== undefined) {
        problems.push(...docProblems);
        const dup = resources.get(key);
        if (dup !== undefined) {
          problems.push({
            file: doc.source.file,
            line: doc.source.line,
            resource: describeResource(result.resource),
            path: "",
            message: `defined twice; first at ${dup.source.file}:${dup.source.line}`,
            severity: "error",
            consequence: "this one is ignored",
          });
          continue;
        }
        resources.set(key, { resource: result.resource, source: doc.source });
        continue;
      }
      // Invalid: keep serving the last valid version of the same resource, if there is one.
      const guess = guessDescription(doc.value);
      const previous = [...this.#goodResources.entries()].find(([, v]) => describeResource(v.resource) === guess);
      const consequence = previous ? "the last valid version keeps serving" : "resource left out";
      problems.push(...docProblems.map((p) => (p.severity === "error" ? { ...p, consequence } : p)));
      if (previous !== undefined && !resources.has(previous[0])) resources.set(previous[0], previous[1]);
      else if (guess !== undefined) {
        invalid.push({
          kind: (doc.value as { kind: string }).kind,
          document: doc.value as Resource,
          problems: result.problems.filter((p) => p.severity === "error").map((p) => `${p.path}: ${p.message}`),
        });
      }
    }
    this.#goodResources.clear();
    for (const [k, v] of resources) this.#goodResources.set(k, v);

    return {
      documents: documents.length,
      resources: [...resources.values()].map((v) => v.resource),
      sources: new Map([...resources].map(([k, v]) => [k, v.source])),
      problems,
      invalid,
    };
  }

  /** Validates the documents of a newly parsed file, reusing the results of documents whose content is unchanged. */
  #validateFile(file: string, documents: readonly LoadedDocument[]): void {
    const previous = this.#byContent.get(file);
    const next = new Map<string, ValidationResult>();
    for (const doc of documents) {
      const key = contentKey(doc.value);
      const result = previous?.get(key) ?? next.get(key) ?? validateResource(doc.value);
      next.set(key, result);
      this.#validated.set(doc, result);
    }
    this.#byContent.set(file, next);
  }

  /** Calls `onChange` (debounced) whenever a file under the paths changes. */
  async watch(onChange: () => void, debounceMs = 25): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const fire = () => {
      if (timer !== undefined) clearTimeout(timer);
      timer = setTimeout(onChange, debounceMs);
    };
    for (const p of this.#paths) {
      const isDir = (await stat(p).catch(() => undefined))?.isDirectory() ?? false;
      // Watching the parent of a single file survives editors that replace the file on save.
      const w = watch(isDir ? p : dirname(p), { recursive: isDir }, fire);
      w.on("error", () => {});
      this.#watchers.push(w);
    }
  }

  close(): void {
    for (const w of this.#watchers) w.close();
    this.#watchers.length = 0;
  }
}
