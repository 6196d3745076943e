// Locations inside the Sluice checkout, found from this file so they work from src/ and dist/ alike.

import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

let cached: string | undefined;

/** The directory holding Sluice's package.json. */
export function projectRoot(): string {
  if (cached !== undefined) return cached;
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, "package.json")) || !existsSync(join(dir, "deploy"))) {
    const up = dirname(dir);
    if (up === dir) throw new Error("cannot find the Sluice project root");
    dir = up;
  }
  cached = dir;
  return dir;
}
