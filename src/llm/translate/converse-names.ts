// Bedrock tool names: Converse takes `[a-zA-Z0-9_-]{1,64}` for a toolSpec's name and for every toolUse in the history,
// where OpenAI and Anthropic also take dots, colons and longer names (MCP tools are often `server.tool`). Names are
// rewritten on the way in (other characters become `_`, cut at 64, made unique) and the answer's calls get the
// client's names back through the request's meta.
import type { RequestMeta } from "./context.js";

const VALID = /^[a-zA-Z0-9_-]{1,64}$/;

export class ConverseToolNames {
  readonly #toProvider = new Map<string, string>();
  readonly #used = new Set<string>();

  /** Names already valid keep themselves: reserved first, so a rewritten name never takes one of them. */
  constructor(valid: Iterable<string> = []) {
    for (const n of valid)
      if (VALID.test(n)) {
        this.#used.add(n);
        this.#toProvider.set(n, n);
      }
  }

  /** The provider's name for a client's tool name, the same every time it is asked. */
  name(client: string): string {
    const known = this.#toProvider.get(client);
    if (known !== undefined) return known;
    let name = VALID.test(client) && !this.#used.has(client) ? client : sanitize(client);
    for (let n = 2; this.#used.has(name); n++) name = `${sanitize(client).slice(0, 60)}_${n}`;
    this.#used.add(name);
    this.#toProvider.set(client, name);
    return name;
  }

  /** Provider name → client name, for the names that were rewritten; undefined when none was. */
  renamed(): Record<string, string> | undefined {
    const out: Record<string, string> = {};
    for (const [client, provider] of this.#toProvider) if (client !== provider) out[provider] = client;
    return Object.keys(out).length > 0 ? out : undefined;
  }

  /** The request's meta with the renamed tools, for the response translators. */
  withMeta(meta: RequestMeta): RequestMeta {
    const renamed = this.renamed();
    return renamed === undefined ? meta : { ...meta, toolNames: renamed };
  }
}

function sanitize(name: string): string {
  const s = name.replace(/[^a-zA-Z0-9_-]/g, "_").slice(0, 64);
  return s === "" ? "_" : s;
}

/** The client's name of a tool the provider called. */
export function clientToolName(meta: RequestMeta, name: string): string {
  return meta.toolNames?.[name] ?? name;
}
