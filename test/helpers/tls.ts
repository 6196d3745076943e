// The TLS fixtures (test/fixtures/tls: self-signed certificates and keys for example.com, foo.example.com and
// wildcard.example.org) and a way to write them into YAML block scalars.

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { projectRoot } from "../../src/cli/paths.js";

/** A file of test/fixtures/tls, e.g. `example.com.crt`. */
export function tlsFixture(file: string): string {
  return readFileSync(join(projectRoot(), "test", "fixtures", "tls", file), "utf8");
}

/** `text` with every line indented by `spaces`, for a YAML block scalar. */
export function indentLines(text: string, spaces = 4): string {
  return text
    .trim()
    .split("\n")
    .map((l) => `${" ".repeat(spaces)}${l}`)
    .join("\n");
}
