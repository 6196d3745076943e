// A parser of Prometheus' text exposition format (0.0.4), for tests that read /metrics by name and label rather than
// by regular expression: HELP and TYPE lines, samples with escaped label values, NaN and ±Inf, optional timestamps.
// It rejects what the format does not allow (a sample of a family typed after it, a malformed line), so a test also
// checks that what Sluice serves is valid.

export interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

export interface Family {
  readonly name: string;
  type: string;
  help: string;
  readonly samples: Sample[];
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*/;
const LABEL = /^[a-zA-Z_][a-zA-Z0-9_]*/;
const SUFFIXES = ["_bucket", "_sum", "_count", "_total", "_created"];

/** A sample value as Prometheus reads it (Go's ParseFloat): NaN and Inf in any case (prom-client writes "Nan"). */
function number(text: string, line: string): number {
  const lower = text.toLowerCase();
  if (lower === "+inf" || lower === "inf") return Number.POSITIVE_INFINITY;
  if (lower === "-inf") return Number.NEGATIVE_INFINITY;
  if (lower === "nan") return Number.NaN;
  const n = Number(text);
  if (text === "" || Number.isNaN(n)) throw new Error(`not a number "${text}" in: ${line}`);
  return n;
}

/** Label set `{a="x",b="y"}` at the start of `s`: the labels and how many characters it took. */
function labels(s: string, line: string): { labels: Record<string, string>; length: number } {
  const out: Record<string, string> = {};
  let i = 1;
  for (;;) {
    while (s[i] === " ") i++;
    if (s[i] === "}") return { labels: out, length: i + 1 };
    const m = LABEL.exec(s.slice(i));
    if (m === null) throw new Error(`bad label name at ${i} in: ${line}`);
    const name = m[0];
    i += name.length;
    if (s[i] !== "=" || s[i + 1] !== '"') throw new Error(`expected =" after ${name} in: ${line}`);
    i += 2;
    let value = "";
    for (;;) {
      const c = s[i];
      if (c === undefined) throw new Error(`unterminated label value in: ${line}`);
      if (c === '"') break;
      if (c === "\\") {
        const e = s[i + 1];
        if (e === "n") value += "\n";
        else if (e === "\\" || e === '"') value += e;
        else throw new Error(`bad escape \\${e} in: ${line}`);
        i += 2;
        continue;
      }
      value += c;
      i++;
    }
    i++;
    if (name in out) throw new Error(`label ${name} twice in: ${line}`);
    out[name] = value;
    if (s[i] === ",") i++;
    else if (s[i] !== "}") throw new Error(`expected , or } at ${i} in: ${line}`);
  }
}

export function parsePrometheusText(text: string): Map<string, Family> {
  const families = new Map<string, Family>();
  const family = (name: string): Family => {
    let f = families.get(name);
    if (f === undefined) {
      f = { name, type: "untyped", help: "", samples: [] };
      families.set(name, f);
    }
    return f;
  };
  /** The family a sample belongs to: its own name, or the name without a histogram / summary / counter suffix. */
  const familyOf = (sample: string): Family => {
    if (families.has(sample)) return family(sample);
    for (const s of SUFFIXES) {
      if (sample.endsWith(s)) {
        const base = sample.slice(0, -s.length);
        const f = families.get(base);
        if (f !== undefined) return f;
      }
    }
    return family(sample);
  };
  for (const line of text.split("\n")) {
    if (line.trim() === "") continue;
    if (line.startsWith("#")) {
      const m = /^#\s+(HELP|TYPE)\s+([^\s]+)(?:\s(.*))?$/.exec(line);
      if (m === null) continue; // a comment
      const f = family(m[2] as string);
      if (m[1] === "TYPE") {
        const type = (m[3] ?? "").trim();
        if (!["counter", "gauge", "histogram", "summary", "untyped"].includes(type))
          throw new Error(`bad TYPE in: ${line}`);
        if (f.samples.length > 0) throw new Error(`TYPE after samples of ${f.name}`);
        f.type = type;
      } else f.help = (m[3] ?? "").replace(/\\n/g, "\n").replace(/\\\\/g, "\\");
      continue;
    }
    const m = NAME.exec(line);
    if (m === null) throw new Error(`bad sample line: ${line}`);
    const name = m[0];
    let rest = line.slice(name.length);
    let ls: Record<string, string> = {};
    if (rest.startsWith("{")) {
      const l = labels(rest, line);
      ls = l.labels;
      rest = rest.slice(l.length);
    }
    const parts = rest.trim().split(/\s+/);
    if (parts.length < 1 || parts.length > 2 || !rest.startsWith(" ")) throw new Error(`bad sample line: ${line}`);
    familyOf(name).samples.push({ name, labels: ls, value: number(parts[0] as string, line) });
  }
  return families;
}

/** The value of the one sample `name` whose labels include `match` (0 when there is none; an error when several). */
export function sampleValue(
  families: Map<string, Family>,
  name: string,
  match: Readonly<Record<string, string>> = {},
): number {
  const found: Sample[] = [];
  for (const f of families.values())
    for (const s of f.samples)
      if (s.name === name && Object.entries(match).every(([k, v]) => s.labels[k] === v)) found.push(s);
  if (found.length > 1)
    throw new Error(`${found.length} samples of ${name} match ${JSON.stringify(match)}: ${JSON.stringify(found)}`);
  return found[0]?.value ?? 0;
}

/** The sum of every sample `name` whose labels include `match`. */
export function sampleSum(families: Map<string, Family>, name: string, match: Readonly<Record<string, string>> = {}) {
  let sum = 0;
  for (const f of families.values())
    for (const s of f.samples)
      if (s.name === name && Object.entries(match).every(([k, v]) => s.labels[k] === v)) sum += s.value;
  return sum;
}

/** GET /metrics of Sluice's admin port, parsed. */
export async function scrape(adminPort: number): Promise<Map<string, Family>> {
  const res = await fetch(`http://127.0.0.1:${adminPort}/metrics`);
  if (!res.ok) throw new Error(`/metrics answered ${res.status}`);
  return parsePrometheusText(await res.text());
}
