// Finding the YAML files of a `-f <file|dir>` argument.

import { readdir, stat } from "node:fs/promises";
import { join } from "node:path";

const YAML_FILE = /\.ya?ml$/i;

/** The YAML files under `path` (a file or a directory, recursively), sorted, hidden entries skipped. */
export async function listYamlFiles(path: string): Promise<string[]> {
  const info = await stat(path);
  if (info.isFile()) return [path];
  const out: string[] = [];
  const walk = async (dir: string): Promise<void> => {
    const entries = await readdir(dir, { withFileTypes: true });
    for (const e of entries) {
      if (e.name.startsWith(".")) continue;
      const full = join(dir, e.name);
      if (e.isDirectory()) await walk(full);
      else if (e.isFile() && YAML_FILE.test(e.name)) out.push(full);
    }
  };
  await walk(path);
  return out.sort();
}

/** `path` and every directory under it, hidden ones skipped (as listYamlFiles skips them). */
export async function directoriesUnder(path: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (dir: string): Promise<void> => {
    out.push(dir);
    const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
    for (const e of entries) if (e.isDirectory() && !e.name.startsWith(".")) await walk(join(dir, e.name));
  };
  await walk(path);
  return out;
}
