// Multi-document YAML with positions: every document keeps a way to find the line of any field path,
// so messages can say `file:line: Kind ns/name: spec.path: message`.

import { isNode, LineCounter, parseAllDocuments } from "yaml";
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
      // Walk down the path, keeping the deepest node that exists.
      for (let n = path.length; n >= 0; n--) {
        const node = doc.getIn(path.slice(0, n), true);
        if (isNode(node) && node.range) return lineCounter.linePos(node.range[0]).line;
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
