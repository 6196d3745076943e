// The long run of the translators' differential property (test/unit/llm-translate-property.test.ts runs it bounded):
// `node dist/bench/llm-translate-property.js [runs] [seed]`. Prints, per provider format, how many random chat
// requests translated and how long it took; a failure throws with the shrunk request and the seed to replay.
import { checkAllTargets } from "../test/helpers/llm-translate-property.js";

const runs = Number(process.argv[2] ?? 20000);
const seed = process.argv[3] === undefined ? Date.now() | 0 : Number(process.argv[3]);
const t0 = performance.now();
for (const r of checkAllTargets({ numRuns: runs, seed }))
  console.log(`${r.target}: ${r.translated}/${r.runs} translated`);
console.log(`seed ${seed}, ${runs} runs per format in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
