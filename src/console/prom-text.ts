// A reader of Prometheus' text exposition format (0.0.4): what the console needs of Sluice's own /metrics — sample
// names, labels and values. HELP, TYPE and comments are skipped; a line it cannot read is skipped, not guessed at.

export interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*/;

function unescapeLabel(v: string): string {
  return v.replace(/\\(.)/g, (_, c: string) => (c === "n" ? "\n" : c));
}

/** The labels of `{...}` starting at `line[at]`, and where the text after `}` starts; undefined when malformed. */
function readLabels(line: string, at: number): { labels: Record<string, string>; end: number } | undefined {
  const labels: Record<string, string> = {};
  let i = at + 1;
  for (;;) {
    while (line[i] === " " || line[i] === ",") i++;
    if (line[i] === "}") return { labels, end: i + 1 };
    const name = LABEL_NAME.exec(line.slice(i))?.[0];
    if (name === undefined) return undefined;
    i += name.length;
    if (line[i] !== "=" || line[i + 1] !== '"') return undefined;
    i += 2;
    let raw = "";
    while (i < line.length && line[i] !== '"') {
      if (line[i] === "\\") {
        raw += line.slice(i, i + 2);
        i += 2;
      } else raw += line[i++];
    }
    if (line[i] !== '"') return undefined;
    i++;
    labels[name] = unescapeLabel(raw);
  }
}

/** As Prometheus reads a value (Go's ParseFloat): NaN and Inf in any case (prom-client writes "Nan"). */
function sampleValue(text: string): number | undefined {
  const t = text.toLowerCase();
  if (t === "nan") return Number.NaN;
  if (t === "+inf" || t === "inf" || t === "+infinity" || t === "infinity") return Number.POSITIVE_INFINITY;
  if (t === "-inf" || t === "-infinity") return Number.NEGATIVE_INFINITY;
  const n = Number(text);
  return text === "" || Number.isNaN(n) ? undefined : n;
}

export function parsePrometheusText(text: string): Sample[] {
  const out: Sample[] = [];
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    const name = NAME.exec(line)?.[0];
    if (name === undefined) continue;
    let rest = line.slice(name.length);
    let labels: Record<string, string> = {};
    if (rest.startsWith("{")) {
      const l = readLabels(rest, 0);
      if (l === undefined) continue;
      labels = l.labels;
      rest = rest.slice(l.end);
    }
    const value = sampleValue(rest.trim().split(/\s+/)[0] ?? "");
    if (value === undefined) continue;
    out.push({ name, labels, value });
  }
  return out;
}
