// The web console on the admin port: /console (a page, its script and stylesheet, read from src/console/static/ as
// written: no build step) and /console/api/state (the JSON the page renders). Read-only: GET and HEAD only.

import { readFile } from "node:fs/promises";
import type { IncomingMessage, ServerResponse } from "node:http";
import { join } from "node:path";
import { projectRoot } from "../cli/paths.js";
import { type ConsoleInput, consoleView } from "./model.js";

const STATIC: Readonly<Record<string, { file: string; type: string }>> = {
  "/console": { file: "index.html", type: "text/html; charset=utf-8" },
  "/console/": { file: "index.html", type: "text/html; charset=utf-8" },
  "/console/app.js": { file: "app.js", type: "text/javascript; charset=utf-8" },
  "/console/style.css": { file: "style.css", type: "text/css; charset=utf-8" },
};

/** Whether `path` is the console's; the admin server passes those here. */
export function isConsolePath(path: string): boolean {
  return path === "/console" || path.startsWith("/console/");
}

const SECURITY_HEADERS = {
  // The page loads only its own script and stylesheet and fetches only its own API.
  "content-security-policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  "cache-control": "no-store",
};

export async function serveConsole(
  path: string,
  req: IncomingMessage,
  res: ServerResponse,
  input: () => Promise<ConsoleInput>,
): Promise<void> {
  if (req.method !== "GET" && req.method !== "HEAD") {
    res.writeHead(405, { allow: "GET, HEAD", "content-type": "text/plain" });
    res.end("the console is read-only\n");
    return;
  }
  if (path === "/console/api/state") {
    res.writeHead(200, { "content-type": "application/json", ...SECURITY_HEADERS });
    res.end(JSON.stringify(consoleView(await input())));
    return;
  }
  const asset = STATIC[path];
  if (asset === undefined) {
    res.writeHead(404, { "content-type": "text/plain" });
    res.end("not found; the console is at /console\n");
    return;
  }
  try {
    const body = await readFile(join(projectRoot(), "src", "console", "static", asset.file));
    res.writeHead(200, { "content-type": asset.type, ...SECURITY_HEADERS });
    res.end(req.method === "HEAD" ? undefined : body);
  } catch (e) {
    res.writeHead(500, { "content-type": "text/plain" });
    res.end(`the console's files are missing (${(e as Error).message}); they ship in src/console/static/\n`);
  }
}
