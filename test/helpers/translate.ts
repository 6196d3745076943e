// Translating a golden input file the way `sluice translate` does, into the document stored as golden output.

import { stringify } from "yaml";
import { loadAndTranslate } from "../../src/cli/load.js";
import { formatProblem } from "../../src/sources/file-source.js";
import { xdsToJson } from "../../src/translate/xds/json.js";

export async function translateToGoldenYaml(file: string, relativeTo: string): Promise<string> {
  const { load, result } = await loadAndTranslate([file]);
  const doc = {
    problems: load.problems.map((p) => formatProblem({ ...p, file: p.file.slice(relativeTo.length + 1) })),
    statuses: result.statuses,
    gateways: result.gateways.map((g) => ({ gateway: g.key, ir: g.ir, ...xdsToJson(g.xds) })),
    // The LLM policy table (routes to AI backends) only where there is one, so other goldens stay as they are.
    ...(result.llm.entries.size > 0
      ? {
          llm: {
            routes: Object.fromEntries([...result.llm.routes].sort()),
            entries: [...result.llm.entries.values()].sort((a, b) => (a.id < b.id ? -1 : 1)),
            ...(result.llm.pools.size > 0 ? { pools: Object.fromEntries([...result.llm.pools].sort()) } : {}),
          },
        }
      : {}),
  };
  return stringify(doc, { aliasDuplicateObjects: false, lineWidth: 0 });
}
