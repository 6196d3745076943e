// Counters and histograms for the request path, written out in Prometheus' text format. prom-client was measured at
// about 0.8 µs per labelled counter increment and 1.4 µs per histogram observation on the CI host (its children hash
// their labels on every call); these hold a child per label values in nested maps and increment plain numbers, which
// keeps the request path's cost to tens of nanoseconds (bench/observability.ts).

export function escapeLabel(v: string): string {
  return v.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");
}

function formatNumber(n: number): string {
  if (n === Number.POSITIVE_INFINITY) return "+Inf";
  if (n === Number.NEGATIVE_INFINITY) return "-Inf";
  return String(n);
}

interface Node<T> {
  child?: T;
  readonly next: Map<string, Node<T>>;
}

/** Children by label values, found without building a key string. */
class Children<T> {
  readonly #root: Node<T> = { next: new Map() };
  readonly all: { readonly values: readonly string[]; readonly child: T }[] = [];

  get(values: readonly string[], make: () => T): T {
    let n = this.#root;
    for (const v of values) {
      let m = n.next.get(v);
      if (m === undefined) {
        m = { next: new Map() };
        n.next.set(v, m);
      }
      n = m;
    }
    if (n.child === undefined) {
      n.child = make();
      this.all.push({ values: [...values], child: n.child });
    }
    return n.child;
  }
}

export interface SeriesFamily {
  lines(): string[];
}

function labelText(names: readonly string[], values: readonly string[], extra = ""): string {
  const parts = names.map((n, i) => `${n}="${escapeLabel(values[i] ?? "")}"`);
  if (extra !== "") parts.push(extra);
  return parts.length === 0 ? "" : `{${parts.join(",")}}`;
}

function sorted<T>(all: readonly { readonly values: readonly string[]; readonly child: T }[]) {
  return [...all].sort((a, b) => {
    const x = a.values.join("\u0000");
    const y = b.values.join("\u0000");
    return x < y ? -1 : x > y ? 1 : 0;
  });
}

export class CounterChild {
  value = 0;
  inc(n = 1): void {
    this.value += n;
  }
}

export class Counter implements SeriesFamily {
  readonly #children = new Children<CounterChild>();
  constructor(
    readonly name: string,
    readonly help: string,
    readonly labelNames: readonly string[],
  ) {}

  labels(...values: string[]): CounterChild {
    return this.#children.get(values, () => new CounterChild());
  }

  lines(): string[] {
    return [
      `# HELP ${this.name} ${this.help}`,
      `# TYPE ${this.name} counter`,
      ...sorted(this.#children.all).map(
        (c) => `${this.name}${labelText(this.labelNames, c.values)} ${formatNumber(c.child.value)}`,
      ),
    ];
  }
}

export class HistogramChild {
  readonly counts: Float64Array;
  sum = 0;
  count = 0;
  constructor(readonly buckets: readonly number[]) {
    this.counts = new Float64Array(buckets.length);
  }
  observe(v: number): void {
    this.sum += v;
    this.count++;
    const b = this.buckets;
    for (let i = 0; i < b.length; i++) {
      if (v <= (b[i] as number)) {
        this.counts[i] = (this.counts[i] as number) + 1;
        return;
      }
    }
  }
}

export class Histogram implements SeriesFamily {
  readonly #children = new Children<HistogramChild>();
  constructor(
    readonly name: string,
    readonly help: string,
    readonly labelNames: readonly string[],
    readonly buckets: readonly number[],
  ) {}

  labels(...values: string[]): HistogramChild {
    return this.#children.get(values, () => new HistogramChild(this.buckets));
  }

  lines(): string[] {
    const out = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} histogram`];
    for (const c of sorted(this.#children.all)) {
      let cumulative = 0;
      this.buckets.forEach((le, i) => {
        cumulative += c.child.counts[i] as number;
        out.push(
          `${this.name}_bucket${labelText(this.labelNames, c.values, `le="${formatNumber(le)}"`)} ${cumulative}`,
        );
      });
      out.push(`${this.name}_bucket${labelText(this.labelNames, c.values, 'le="+Inf"')} ${c.child.count}`);
      out.push(`${this.name}_sum${labelText(this.labelNames, c.values)} ${formatNumber(c.child.sum)}`);
      out.push(`${this.name}_count${labelText(this.labelNames, c.values)} ${c.child.count}`);
    }
    return out;
  }
}

/** The request path's families, in the order they are written. */
export class Series {
  readonly #families: SeriesFamily[] = [];

  counter(name: string, help: string, labelNames: readonly string[]): Counter {
    const c = new Counter(name, help, labelNames);
    this.#families.push(c);
    return c;
  }

  histogram(name: string, help: string, labelNames: readonly string[], buckets: readonly number[]): Histogram {
    const h = new Histogram(name, help, labelNames, buckets);
    this.#families.push(h);
    return h;
  }

  text(): string {
    const lines = this.#families.flatMap((f) => f.lines());
    return lines.length === 0 ? "" : `${lines.join("\n")}\n`;
  }
}
