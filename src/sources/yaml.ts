// Multi-document YAML with positions: every document keeps a way to find the line of any field path,
// so messages can say `file:line: Kind ns/name: spec.path: message`.

import { isMap, isNode, isScalar, isSeq, LineCounter, parseAllDocuments } from "yaml";
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

export function parseYamlFile(file: string, text: string): ParsedFile {
  const lineCounter = new LineCounter();
  const docs = parseAllDocuments(text, { lineCounter, prettyErrors: false, uniqueKeys: true });
  const problems: YamlProblem[] = [];
  const documents: LoadedDocument[] = [];
  const list = Array.isArray(docs) ? docs : [];
  if (!Array.isArray(docs)) {
    // parseAllDocuments returns an EmptyStream for empty input.
    return { file, documents, problems };
  }
  for (const doc of list) {
    for (const e of doc.errors) {
      problems.push({ file, line: e.linePos?.[0]?.line ?? 1, message: e.message.split("\n")[0] ?? e.message });
    }
    if (doc.contents === null) continue; // an empty document between `---` separators
    const startOffset = doc.contents.range?.[0] ?? 0;
    const docLine = lineCounter.linePos(startOffset).line;
    const lineOf = (path: readonly (string | number)[]): number => {
      // Walk down the path, keeping the deepest node that exists; a mapping entry is found at the line of its key.
      for (let n = path.length; n > 0; n--) {
        const parent = doc.getIn(path.slice(0, n - 1), true);
        const last = path[n - 1];
        if (isMap(parent)) {
          const pair = parent.items.find((p) => (isScalar(p.key) ? p.key.value : p.key) === last);
          const key = pair?.key;
          if (isNode(key) && key.range) return lineCounter.linePos(key.range[0]).line;
        } else if (isSeq(parent) && typeof last === "number") {
          const item = parent.items[last];
          if (isNode(item) && item.range) return lineCounter.linePos(item.range[0]).line;
        }
      }
      return docLine;
    };
    let value: unknown;
    try {
      value = doc.toJS({ maxAliasCount: 100 });
    } catch (e) {
      problems.push({ file, line: docLine, message: e instanceof Error ? e.message : String(e) });
      continue;
    }
    documents.push({ value, source: { file, line: docLine, lineOf } });
  }
  return { file, documents, problems };
}
