// Multi-document YAML with positions: every document keeps a way to find the line of any field path,
// so messages can say `file:line: Kind ns/name: spec.path: message`.
//
// Values come from js-yaml (an order of magnitude faster than a full syntax tree); the `yaml` library's syntax tree,
// which knows where every node is, is built only when a line is asked for — that is, when there is something to
// report — or when the fast parser finds a syntax error, so that every error is reported with its line.

import { CORE_SCHEMA, loadAll } from "js-yaml";
import { type Document, isMap, isNode, isScalar, isSeq, LineCounter, parseAllDocuments } from "yaml";
import type { SourceRef } from "../api/resource.js";

export interface LoadedDocument {
  readonly value: unknown;
  readonly source: SourceRef;
}

export interface YamlProblem {
  readonly file: string;
  readonly line: number;
  readonly message: string;
}

export interface ParsedFile {
  readonly file: string;
  readonly documents: readonly LoadedDocument[];
  /** Syntax errors; when non-empty the documents are not trustworthy and must not replace earlier ones. */
  readonly problems: readonly YamlProblem[];
}

interface Positions {
  readonly lineCounter: LineCounter;
  /** The non-empty documents, in the same order as the values. */
  readonly docs: readonly Document.Parsed[];
}

function isEmptyDocument(doc: Document.Parsed): boolean {
  return doc.contents === null || (isScalar(doc.contents) && doc.contents.value === null);
}

function parsePositions(text: string): Positions {
  const lineCounter = new LineCounter();
  const all = parseAllDocuments(text, { lineCounter, prettyErrors: false, uniqueKeys: true });
  return { lineCounter, docs: Array.isArray(all) ? all.filter((d) => !isEmptyDocument(d)) : [] };
}

function lineOfPath(p: Positions, index: number, path: readonly (string | number)[]): number {
  const doc = p.docs[index];
  if (doc === undefined) return 1;
  // Walk down the path, keeping the deepest node that exists; a mapping entry is found at the line of its key.
  for (let n = path.length; n > 0; n--) {
    const parent = doc.getIn(path.slice(0, n - 1), true);
    const last = path[n - 1];
    if (isMap(parent)) {
      const pair = parent.items.find((it) => (isScalar(it.key) ? it.key.value : it.key) === last);
      const key = pair?.key;
      if (isNode(key) && key.range) return p.lineCounter.linePos(key.range[0]).line;
    } else if (isSeq(parent) && typeof last === "number") {
      const item = parent.items[last];
      if (isNode(item) && item.range) return p.lineCounter.linePos(item.range[0]).line;
    }
  }
  const start = doc.contents?.range?.[0];
  return start === undefined ? 1 : p.lineCounter.linePos(start).line;
}

export function parseYamlFile(file: string, text: string): ParsedFile {
  let values: unknown[];
  try {
    values = loadAll(text, undefined, { schema: CORE_SCHEMA, filename: file }).filter(
      (v) => v !== null && v !== undefined,
    );
  } catch {
    return slowParse(file, text);
  }
  let positions: Positions | undefined;
  const at = () => {
    positions ??= parsePositions(text);
    return positions;
  };
  const documents = values.map((value, index): LoadedDocument => {
    const source: SourceRef = {
      file,
      get line() {
        return lineOfPath(at(), index, []);
      },
      lineOf: (path) => lineOfPath(at(), index, path),
    };
    return { value, source };
  });
  return { file, documents, problems: [] };
}

/** The `yaml` library's full parse: every syntax error with its line. */
function slowParse(file: string, text: string): ParsedFile {
  const lineCounter = new LineCounter();
  const all = parseAllDocuments(text, { lineCounter, prettyErrors: false, uniqueKeys: true });
  const problems: YamlProblem[] = [];
  for (const doc of Array.isArray(all) ? all : []) {
    for (const e of [...doc.errors]) {
      problems.push({ file, line: e.linePos?.[0]?.line ?? 1, message: e.message.split("\n")[0] ?? e.message });
    }
  }
  if (problems.length === 0) {
    // js-yaml refused something the yaml library accepts (for instance a YAML 1.1 construct): say so plainly.
    try {
      loadAll(text, undefined, { schema: CORE_SCHEMA, filename: file });
    } catch (e) {
      const mark = (e as { mark?: { line?: number } }).mark;
      problems.push({ file, line: (mark?.line ?? 0) + 1, message: (e as Error).message.split("\n")[0] ?? String(e) });
    }
  }
  return { file, documents: [], problems };
}
