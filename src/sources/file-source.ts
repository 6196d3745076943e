// The file source: YAML files or directories, validated, with "last good" semantics, watched for changes.
//
// - A file with a YAML syntax error keeps contributing the documents it had when it last parsed.
// - A resource that fails validation is left out, except that the last valid version of the same resource
//   (kind/namespace/name) keeps being served while the new one is broken.
// - Every problem names file, line, resource and field path.

import { createHash } from "node:crypto";
import { type FSWatcher, readFileSync, watch } from "node:fs";
import { stat } from "node:fs/promises";
import { dirname } from "node:path";
import { type Problem, splitPath } from "../api/problems.js";
import { describeResource, type Resource, resourceKey, type SourceRef } from "../api/resource.js";
import { type ValidationResult, validateResource } from "../api/validate.js";
import type { InvalidResource } from "../translate/input.js";
import { directoriesUnder, listYamlFiles } from "./files.js";
import { type LoadedDocument, type ParsedFile, parseYamlFile } from "./yaml.js";

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
  // Line 0: no line to name (a file that cannot be read, an object from the API server).
  const parts = [p.line > 0 ? `${p.file}:${p.line}` : p.file];
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

/** Whether a parsed document holds a number JSON does not print as itself (NaN, ±Infinity, -0). */
function hasSpecialNumber(v: unknown): boolean {
  if (typeof v === "number") return !Number.isFinite(v) || Object.is(v, -0);
  if (typeof v !== "object" || v === null) return false;
  if (Array.isArray(v)) {
    for (const x of v) if (hasSpecialNumber(x)) return true;
    return false;
  }
  for (const k in v) if (hasSpecialNumber((v as Record<string, unknown>)[k])) return true;
  return false;
}

/**
 * A digest of a parsed document's JSON, written so that it tells apart what JSON alone would not (`.nan`, `.inf` and
 * `-0` print as null/0).
 */
export function contentKey(value: unknown): string {
  // The replacer costs several times JSON.stringify itself, and such numbers are rare: it runs only when there is one.
  const json = hasSpecialNumber(value)
    ? JSON.stringify(value, (_, v: unknown) =>
        typeof v === "number" && (!Number.isFinite(v) || Object.is(v, -0))
          ? `\u0000number:${Object.is(v, -0) ? "-0" : v}`
          : v,
      )
    : JSON.stringify(value);
  // Kept for every document while its file is unchanged: a digest, not the JSON itself.
  return createHash("sha256").update(json).digest("base64");
}

function readError(e: unknown): string {
  return (e as { code?: string }).code === "ENOENT"
    ? "no such file or directory"
    : `cannot read: ${(e as Error).message}`;
}

/** What a parsed document contributes to every load while its file is unchanged. */
interface DocumentEntry {
  readonly result: ValidationResult;
  /** The valid resource, under its resourceKey. */
  readonly served?: { readonly key: string; readonly resource: Resource; readonly source: SourceRef };
  /** The validator's findings, with file and line. */
  readonly problems: readonly SourceProblem[];
}

export class FileSource {
  readonly #paths: readonly string[];
  /** Last documents of each file that parsed without syntax errors. */
  readonly #goodDocs = new Map<string, readonly LoadedDocument[]>();
  /** Last valid version of each resource, kept while a newer version is invalid. */
  #goodResources = new Map<string, { resource: Resource; source: SourceRef }>();
  readonly #entries = new WeakMap<LoadedDocument, DocumentEntry>();
  /** One watcher per directory under the paths (watch()). */
  readonly #dirWatchers = new Map<string, FSWatcher>();
  #closed = false;
  /** Last text and parse of each file: an unchanged file is not parsed again. */
  readonly #parsed = new Map<string, { bytes: Buffer; parsed: ParsedFile }>();
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
    /** The documents each file contributes, in file order. */
    const fileDocs = new Map<string, readonly LoadedDocument[]>();
    // Bytes, not text: an unchanged file is recognised without decoding it, and its bytes (outside the JavaScript
    // heap) are dropped at once. Read synchronously: a few small files take a few milliseconds, where one
    // asynchronous round trip per file (four per read) waits behind whatever else the server is doing.
    const contents = files.map((file) => {
      try {
        return { bytes: readFileSync(file) };
      } catch (e) {
        return { error: e as unknown };
      }
    });
    for (let i = 0; i < files.length; i++) {
      const file = files[i] as string;
      const read = contents[i];
      if (read === undefined || "error" in read) {
        problems.push({ file, line: 0, path: "", message: readError(read?.error), severity: "error" });
        continue;
      }
      const cached = this.#parsed.get(file);
      let parsed: ParsedFile;
      if (cached?.bytes.equals(read.bytes)) parsed = cached.parsed;
      else {
        parsed = parseYamlFile(file, read.bytes.toString("utf8"));
        if (parsed.problems.length === 0) this.#validateFile(file, parsed.documents);
        this.#parsed.set(file, { bytes: read.bytes, parsed });
      }
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
        if (kept !== undefined) fileDocs.set(file, kept);
        documents.push(...(kept ?? []));
        continue;
      }
      this.#goodDocs.set(file, parsed.documents);
      fileDocs.set(file, parsed.documents);
      documents.push(...parsed.documents);
    }
    const present = new Set(files);
    for (const file of [...this.#goodDocs.keys()]) if (!present.has(file)) this.#goodDocs.delete(file);
    for (const file of [...this.#parsed.keys()]) if (!present.has(file)) this.#parsed.delete(file);
    for (const file of [...this.#byContent.keys()]) if (!present.has(file)) this.#byContent.delete(file);

    const fast = this.#update(fileDocs);
    const entryOf = (doc: LoadedDocument) => this.#entryOf(doc);
    if (fast !== undefined) {
      for (const docs of fileDocs.values()) for (const doc of docs) problems.push(...this.#entryOf(doc).problems);
      let sources: Map<string, SourceRef> | undefined;
      return {
        documents: documents.length,
        resources: fast,
        // Built when read: nothing in translation reads it, and a map of every resource per load is costly garbage.
        get sources() {
          sources ??= new Map(
            [...fileDocs.values()].flatMap((docs) =>
              docs.flatMap((doc) => {
                const served = entryOf(doc).served;
                return served !== undefined ? [[served.key, served.source] as const] : [];
              }),
            ),
          );
          return sources;
        },
        problems,
        invalid: [],
      };
    }

    const resources = new Map<string, { resource: Resource; source: SourceRef }>();
    // In the order of `resources`, which is the order of the documents.
    const list: Resource[] = [];
    const sources = new Map<string, SourceRef>();
    const invalid: InvalidResource[] = [];
    let clean = true;
    for (const doc of documents) {
      const { result, served, problems: docProblems } = this.#entryOf(doc);
      if (served !== undefined) {
        if (docProblems.length > 0) problems.push(...docProblems);
        const dup = resources.get(served.key);
        if (dup !== undefined) {
          clean = false;
          problems.push({
            file: doc.source.file,
            line: doc.source.line,
            resource: describeResource(served.resource),
            path: "",
            message: `defined twice; first at ${dup.source.file}:${dup.source.line}`,
            severity: "error",
            consequence: "this one is ignored",
          });
          continue;
        }
        resources.set(served.key, served);
        list.push(served.resource);
        sources.set(served.key, served.source);
        continue;
      }
      // Invalid: keep serving the last valid version of the same resource, if there is one.
      clean = false;
      const guess = guessDescription(doc.value);
      const previous = [...this.#goodResources.entries()].find(([, v]) => describeResource(v.resource) === guess);
      const consequence = previous ? "the last valid version keeps serving" : "resource left out";
      problems.push(...docProblems.map((p) => (p.severity === "error" ? { ...p, consequence } : p)));
      if (previous !== undefined && !resources.has(previous[0])) {
        resources.set(previous[0], previous[1]);
        list.push(previous[1].resource);
        sources.set(previous[0], previous[1].source);
      } else if (guess !== undefined) {
        invalid.push({
          kind: (doc.value as { kind: string }).kind,
          document: doc.value as Resource,
          problems: result.problems.filter((p) => p.severity === "error").map((p) => `${p.path}: ${p.message}`),
        });
      }
    }
    this.#goodResources = resources;
    this.#rebuild(fileDocs, clean);
    return { documents: documents.length, resources: list, sources, problems, invalid };
  }

  // ---- Without invalid or duplicate documents (the usual case), a load that changed some files only updates what
  // those files contribute: building maps of every resource on each load makes large objects of garbage each time.

  /** The documents each file contributed last time. */
  #lastDocs = new Map<string, readonly LoadedDocument[]>();
  /** How many valid documents have each resource key. */
  readonly #keyCounts = new Map<string, number>();
  #duplicateKeys = 0;
  #invalidDocuments = 0;
  /** The last load had no invalid or duplicate document, so #goodResources is every served document by key. */
  #clean = false;

  /**
   * Updates the bookkeeping with the files whose documents changed; when the result has no invalid or duplicate
   * document, returns the resources in document order (and #goodResources is up to date), else undefined (the full
   * pass then runs and rebuilds the bookkeeping).
   */
  #update(fileDocs: ReadonlyMap<string, readonly LoadedDocument[]>): Resource[] | undefined {
    if (!this.#clean) return undefined;
    const removed: LoadedDocument[] = [];
    const added: LoadedDocument[] = [];
    for (const [file, docs] of this.#lastDocs) if (fileDocs.get(file) !== docs) removed.push(...docs);
    for (const [file, docs] of fileDocs) if (this.#lastDocs.get(file) !== docs) added.push(...docs);
    this.#lastDocs = new Map(fileDocs);
    for (const doc of removed) {
      const served = this.#entryOf(doc).served;
      if (served === undefined) {
        this.#invalidDocuments--;
        continue;
      }
      const n = (this.#keyCounts.get(served.key) ?? 0) - 1;
      if (n === 1) this.#duplicateKeys--;
      if (n > 0) this.#keyCounts.set(served.key, n);
      else this.#keyCounts.delete(served.key);
    }
    for (const doc of added) {
      const served = this.#entryOf(doc).served;
      if (served === undefined) {
        this.#invalidDocuments++;
        continue;
      }
      const n = (this.#keyCounts.get(served.key) ?? 0) + 1;
      if (n === 2) this.#duplicateKeys++;
      this.#keyCounts.set(served.key, n);
    }
    // Not clean: the full pass needs #goodResources as the last load left it (the last valid versions).
    if (this.#duplicateKeys > 0 || this.#invalidDocuments > 0) {
      this.#clean = false;
      return undefined;
    }
    for (const doc of removed) {
      const served = this.#entryOf(doc).served;
      if (served !== undefined && !this.#keyCounts.has(served.key)) this.#goodResources.delete(served.key);
    }
    for (const doc of added) {
      const served = this.#entryOf(doc).served;
      if (served !== undefined) this.#goodResources.set(served.key, served);
    }
    const list: Resource[] = [];
    for (const docs of fileDocs.values()) {
      for (const doc of docs) {
        const served = this.#entryOf(doc).served;
        if (served !== undefined) list.push(served.resource);
      }
    }
    return list;
  }

  /** After a full pass: the bookkeeping #update keeps, from scratch. */
  #rebuild(fileDocs: ReadonlyMap<string, readonly LoadedDocument[]>, clean: boolean): void {
    this.#lastDocs = new Map(fileDocs);
    this.#keyCounts.clear();
    this.#duplicateKeys = 0;
    this.#invalidDocuments = 0;
    for (const docs of fileDocs.values()) {
      for (const doc of docs) {
        const served = this.#entryOf(doc).served;
        if (served === undefined) {
          this.#invalidDocuments++;
          continue;
        }
        const n = (this.#keyCounts.get(served.key) ?? 0) + 1;
        if (n === 2) this.#duplicateKeys++;
        this.#keyCounts.set(served.key, n);
      }
    }
    this.#clean = clean;
  }

  /** A document's validation and problems, worked out once per parsed document. */
  #entryOf(doc: LoadedDocument): DocumentEntry {
    let entry = this.#entries.get(doc);
    if (entry === undefined) {
      let result = this.#validated.get(doc);
      if (result === undefined) {
        result = validateResource(doc.value);
        this.#validated.set(doc, result);
      }
      const resource = result.resource;
      entry = {
        result,
        ...(resource !== undefined ? { served: { key: resourceKey(resource), resource, source: doc.source } } : {}),
        problems: result.problems.map((p) => toSourceProblem(doc, p)),
      };
      this.#entries.set(doc, entry);
    }
    return entry;
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

  /**
   * Calls `onChange` on every change event under the paths; one save is often several events (the caller gathers
   * them: SluiceServer). Each directory is watched on its own, not with `recursive`: Node's recursive watch on Linux
   * watches the files it found, and a file replaced by a rename (an editor's atomic save, a tool writing a temporary
   * file and renaming it) is not watched again, nor is anything after it (seen with Node 22.23). A directory's own
   * watch reports a rename into it; directories that appear later are watched once an event shows them.
   */
  async watch(onChange: () => void): Promise<void> {
    // One scan at a time (a scan that began before a directory appeared must not undo a later one's watch); events
    // during a scan make one more.
    let scanning: Promise<void> | undefined;
    let again = false;
    const rescan = (): Promise<void> => {
      if (scanning !== undefined) {
        again = true;
        return scanning;
      }
      scanning = (async () => {
        do {
          again = false;
          await scan();
        } while (again && !this.#closed);
      })().finally(() => {
        scanning = undefined;
      });
      return scanning;
    };
    const scan = async (): Promise<void> => {
      const dirs = new Set<string>();
      for (const p of this.#paths) {
        const isDir = (await stat(p).catch(() => undefined))?.isDirectory() ?? false;
        // Watching the parent of a single file survives editors that replace the file on save.
        if (!isDir) dirs.add(dirname(p));
        else for (const d of await directoriesUnder(p)) dirs.add(d);
      }
      for (const [dir, w] of this.#dirWatchers) {
        if (dirs.has(dir)) continue;
        w.close();
        this.#dirWatchers.delete(dir);
      }
      for (const dir of dirs) {
        if (this.#dirWatchers.has(dir) || this.#closed) continue;
        try {
          const w = watch(dir, () => {
            onChange();
            // A new subdirectory (or one gone) changes what is watched.
            void rescan();
          });
          w.on("error", () => {});
          this.#dirWatchers.set(dir, w);
        } catch {
          // Gone between the scan and the watch: the next event's scan sees it.
        }
      }
    };
    await rescan();
  }

  close(): void {
    this.#closed = true;
    for (const w of this.#dirWatchers.values()) w.close();
    this.#dirWatchers.clear();
  }
}
