// Process figures for the benchmarks.

import { readFileSync } from "node:fs";

/** CPU ms used so far by a process, user + system (Linux /proc at 10 ms ticks; 0 elsewhere). */
export function cpuMs(pid: number | undefined): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return 0;
  }
}
