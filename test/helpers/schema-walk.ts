// The method of the schema walks (test/unit/schema-walk.test.ts for GwPolicy and GwBackend, gw-model-walk.test.ts for
// GwModel): every leaf field of a schema is probed by translating a minimal resource with the field set beside the
// same resource without it (or with another value), and the field reaches something when the xDS or a Sluice table
// differ, or when a status message names it or an enclosing field. Values come from the schema itself (enums, bounds,
// patterns, defaults); each walk gives the samples a schema cannot say, the world its probes are translated in, and
// the fields that reach nothing by design (selectors, metadata) with why.
import assert from "node:assert/strict";
import type { Resource } from "../../src/api/resource.js";
import { validateResource } from "../../src/api/validate.js";
import { makeInput } from "../../src/translate/input.js";
import { translate } from "../../src/translate/translate.js";
import { xdsToJson } from "../../src/translate/xds/json.js";
import { tlsFixture } from "./tls.js";

// biome-ignore lint/suspicious/noExplicitAny: a JSON Schema node, read structurally.
export type S = any;
export type Json = unknown;
const RULES = "x-kubernetes-validations";

export const isObj = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);
export const clone = <T>(v: T): T => structuredClone(v);

/** An object schema with fields of its own (a leaf otherwise: scalars, maps, free JSON, empty objects). */
const hasFields = (s: S): boolean =>
  isObj(s) &&
  isObj(s.properties) &&
  Object.keys(s.properties).length > 0 &&
  s["x-kubernetes-preserve-unknown-fields"] !== true;
const isArrayOfObjects = (s: S): boolean => s?.type === "array" && hasFields(s.items);

/** The members of each exactly-one / at-most-one rule of an object schema (schema-kit.ts exactlyOne, atMostOne). */
function groups(s: S): { members: string[]; exactly: boolean }[] {
  const out: { members: string[]; exactly: boolean }[] = [];
  for (const r of (s?.[RULES] ?? []) as { rule: string }[]) {
    const m = /^(\(has\(self\.\w+\) \? 1 : 0\)(?: \+ \(has\(self\.\w+\) \? 1 : 0\))*) (==|<=) 1$/.exec(r.rule);
    if (m === null) continue;
    out.push({ members: [...(m[1] ?? "").matchAll(/self\.(\w+)/g)].map((x) => x[1] ?? ""), exactly: m[2] === "==" });
  }
  return out;
}

/** Paths are written relative to `spec`, arrays as `name[]` (an index or a sub-backend's name in brackets too). */
export const norm = (path: string) => path.replace(/\[[^\]"{}[,:\s]*\]/g, "[]");

// ---- values ----

/** Removes the other members of every group `key` is in (the probe sets `key`). */
function clearGroups(s: S, obj: Record<string, Json>, key: string): void {
  for (const g of groups(s)) if (g.members.includes(key)) for (const m of g.members) if (m !== key) delete obj[m];
}
const inExactlyOne = (s: S, key: string) => groups(s).some((g) => g.exactly && g.members.includes(key));

/** The schema's own rules that `obj` breaks (schema-kit.ts Rule.check). */
const broken = (s: S, obj: Json) =>
  ((s?.[RULES] ?? []) as { check: (o: Json) => boolean }[]).filter((r) => !r.check(obj));

function stringSample(s: S, path: string, variant: 0 | 1): string {
  const v = anyStringSample(s, path, variant);
  // (A reference's kind stays Service first: the Services of the world exist, GwBackends of those names do not.)
  return v === s.default && !path.endsWith(".kind") ? anyStringSample(s, path, variant === 0 ? 1 : 0) : v;
}

function anyStringSample(s: S, path: string, variant: 0 | 1): string {
  const p = String(s.pattern ?? "");
  const last = norm(path).split(".").at(-1) ?? "";
  if (s["x-sluice-format"] === "cel") return variant === 0 ? "request.path == '/a'" : "request.path == '/b'";
  if (s["x-sluice-format"] === "uri-http") return ["http://a.example:8080", "http://b.example:8080"][variant] ?? "";
  if (p.includes("ns|us|µs|ms|s|m|h")) return ["7s", "9s"][variant] ?? "";
  if (p.startsWith("^:?[")) return [":path", "x-probe-b"][variant] ?? "";
  if (p.startsWith("^[-!#")) return ["x-probe-a", "x-probe-b"][variant] ?? "";
  if (last === "kind") return ["Service", "GwBackend"][variant] ?? "";
  if (last === "group") return "";
  if (last === "sni") return ["a.example.com", "b.example.com"][variant] ?? "";
  if (/^\^\[a-z0-9\]|\^\[a-zA-Z0-9\]/.test(p)) return ["probe-a", "probe-b"][variant] ?? "";
  // Any other pattern: the first of a few common shapes it accepts (else SAMPLES must give one).
  const shapes = [
    ["probe-a", "/probe-a", "a.example.com", "https://a.example", "u:$apr1$a$bbbbbbbbbbbbbbbbbbbbbb", "Jwt"],
    ["probe-b", "/probe-b", "b.example.com", "https://b.example", "v:$apr1$c$dddddddddddddddddddddd", "IdToken"],
  ][variant] as string[];
  return shapes.find((x) => p === "" || new RegExp(p).test(x)) ?? `no-sample-for-${p}`;
}

/** `probe` without the field at `segments`, undefined when it cannot be absent (required, or its group's only member). */
function without(schema: S, probe: Record<string, Json>, segments: string[]) {
  const out = clone(probe);
  let node: Json = out;
  let s = schema;
  for (const [i, seg] of segments.entries()) {
    const array = seg.endsWith("[]");
    const key = array ? seg.slice(0, -2) : seg;
    if (i === segments.length - 1) {
      if ((s.required ?? []).includes(key) || inExactlyOne(s, key)) return undefined;
      delete (node as Record<string, Json>)[key];
      return broken(s, node).length > 0 ? undefined : out;
    }
    const child = s.properties[key];
    node = (node as Record<string, Json>)[key];
    if (array) node = (node as Json[])[0];
    s = array ? child.items : child;
  }
  return out;
}

/** Every leaf field under `s`, as segment lists. */
function leaves(s: S, prefix: string[] = []): string[][] {
  const out: string[][] = [];
  for (const [k, child] of Object.entries((s.properties ?? {}) as Record<string, S>)) {
    if (hasFields(child)) out.push(...leaves(child, [...prefix, k]));
    else if (isArrayOfObjects(child)) out.push(...leaves(child.items, [...prefix, `${k}[]`]));
    else out.push([...prefix, k]);
  }
  return out;
}

// ---- the world each probe is translated in ----

export const doc = (apiVersion: string, kind: string, name: string, spec: Json, extra: Record<string, Json> = {}) => ({
  apiVersion,
  kind,
  metadata: { name, namespace: "default" },
  ...(spec !== undefined ? { spec } : {}),
  ...extra,
});

/**
 * The Secrets and ConfigMaps a walk's samples name (`probe-a`, `probe-b`, and any other of `secrets`), each holding its
 * own values under every key a credential, TLS or CA reference reads, so a reference to one or the other shows.
 */
export function probeSecrets(secrets: readonly (readonly [name: string, host: string])[]): Json[] {
  return [
    ...secrets.map(([name, host]) =>
      doc("v1", "Secret", name, undefined, {
        type: "kubernetes.io/tls",
        stringData: {
          "tls.crt": tlsFixture(`${host}.crt`),
          "tls.key": tlsFixture(`${host}.key`),
          Authorization: `key-${name}`,
          clientSecret: `secret-${name}`,
          clientID: `id-${name}`,
          tenantID: `tenant-${name}`,
          accessKey: `access-${name}`,
          secretKey: `secret-${name}`,
          signingKey: tlsFixture(`${host}.key`),
          "credentials.json": JSON.stringify({
            type: "authorized_user",
            client_id: name,
            client_secret: "s",
            refresh_token: "r",
          }),
          ".htaccess": `${name}:$apr1$x$y`,
        },
      }),
    ),
    doc("v1", "ConfigMap", "probe-a", undefined, { data: { "ca.crt": tlsFixture("example.com.crt") } }),
    doc("v1", "ConfigMap", "probe-b", undefined, { data: { "ca.crt": tlsFixture("foo.example.com.crt") } }),
  ];
}

export interface Output {
  readonly reach: string;
  readonly statuses: string;
}

/**
 * The messages of every status condition that reports something (a Warning, a refused reference ...): not those that
 * say a resource is accepted or which fields apply ("applies backend.auth" names a field without serving it).
 */
export function reports(statuses: unknown): string {
  const out: string[] = [];
  const visit = (v: unknown): void => {
    if (Array.isArray(v)) v.forEach(visit);
    else if (isObj(v)) {
      if (typeof v.type === "string" && typeof v.message === "string") {
        if (!(v.status === "True" && (v.type === "Accepted" || v.type === "Attached"))) out.push(v.message);
      } else Object.values(v).forEach(visit);
    }
  };
  visit(statuses);
  return out.join("\n");
}

/** Whether a status names `path` (relative to spec) or an enclosing field of at least `minDepth` segments. */
export function named(statuses: string, path: string, prefixes: readonly string[], minDepth: number): boolean {
  const text = norm(statuses);
  const segs = norm(path).split(".");
  // A GwBackend type reported whole: "the a2a backend type is accepted but not served yet".
  if (text.includes(`the ${segs[0]} backend type`)) return true;
  // A GwPolicy's notes name traffic and frontend fields within their section (`extAuth.backendRef: ...`).
  const section = prefixes.includes("") && ["frontend", "traffic"].includes(segs[0] ?? "");
  const candidates: string[] = [];
  for (let n = segs.length; n >= minDepth; n--) candidates.push(segs.slice(0, n).join("."));
  if (section) for (let n = segs.length; n > minDepth; n--) candidates.push(segs.slice(1, n).join("."));
  // A section field reported whole ("<field>: ..." at the start of a line).
  if (section && segs[1] !== undefined && new RegExp(`(^|\\n)${segs[1]}: `).test(text)) return true;
  for (const p of candidates) {
    for (const prefix of prefixes) {
      const at = `${prefix}${p}`;
      const re = new RegExp(`(^|[^\\w.])${at.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}($|[^\\w])`);
      if (re.test(text)) return true;
    }
  }
  return false;
}

export interface Context {
  readonly name: string;
  /** The resources of the probe, from the spec being probed. */
  readonly docs: (spec: Record<string, Json>) => Json[];
  readonly base: Record<string, Json>;
}

export interface Drop {
  readonly field: string;
  readonly context: string;
  readonly why: string;
}

export interface WalkOptions {
  /** Values a schema cannot say (a CEL expression of the right type, a JWKS, a matching reference ...), by path. */
  readonly samples: Record<string, readonly [Json, Json]>;
  /** Documents every probe is translated beside (validated once). */
  readonly world: readonly Json[];
  /** Fields that reach nothing by design, each with why: only selectors and metadata belong here. */
  readonly allowed: Record<string, string>;
}

/** The walk of one family of schemas, with its samples, world and allowed fields. */
export function schemaWalker(options: WalkOptions) {
  const { samples, world, allowed } = options;
  /** The sample given for `path`: the longest key that ends the path. */
  function givenSample(path: string): readonly [Json, Json] | undefined {
    const p = norm(path);
    const key = Object.keys(samples)
      .filter((k) => p === k || p.endsWith(`.${k}`))
      .sort((a, b) => b.length - a.length)[0];
    return key === undefined ? undefined : samples[key];
  }

  /** A value of `s` at `path`; `variant` 0 and 1 differ, and 0 is never the schema's default. */
  function sample(s: S, path: string, variant: 0 | 1): Json {
    const given = givenSample(path);
    if (given !== undefined && !hasFields(s)) return clone(given[variant]);
    if (Array.isArray(s.enum)) {
      const values = (s.enum as string[]).filter((v) => v !== s.default);
      return values[variant % values.length] ?? s.default;
    }
    if (s.type === "boolean") return variant === 0 ? s.default !== true : s.default === true;
    if (s.type === "integer" || s.type === "number") {
      const min = typeof s.minimum === "number" ? s.minimum : 0;
      const max = typeof s.maximum === "number" ? s.maximum : min + 100;
      const picks = [min + 2, min + 3, min + 1, min].filter((v) => v <= max && v !== s.default);
      return picks[variant % picks.length] ?? min;
    }
    if (s["x-kubernetes-int-or-string"] === true && typeof s.pattern === "string") return ["3Mi", "5Mi"][variant];
    if (s.type === "string") return stringSample(s, path, variant);
    if (s.type === "array") {
      if (hasFields(s.items)) return [minimal(s.items, `${path}[]`, variant)];
      return [sample(s.items, `${path}[]`, variant)];
    }
    if (isObj(s.additionalProperties))
      return { [`probe-${"ab"[variant]}`]: sample(s.additionalProperties, `${path}.*`, variant) };
    if (hasFields(s)) return minimal(s, path, variant);
    if (s["x-kubernetes-preserve-unknown-fields"] === true) return { [`probe${variant}`]: variant + 1 };
    return {};
  }

  /** The smallest valid value of an object schema: its required fields, and the first member of each exactly-one group. */
  function minimal(s: S, path: string, variant: 0 | 1): Record<string, Json> {
    const given = givenSample(path);
    // (Only where it fits: a guard's `policies.auth` has no `key`.)
    if (given !== undefined && Object.keys(given[variant] as object).every((k) => s.properties?.[k] !== undefined)) {
      return clone(given[variant]) as Record<string, Json>;
    }
    const out: Record<string, Json> = {};
    for (const k of (s.required ?? []) as string[]) out[k] = sample(s.properties[k], `${path}.${k}`, variant);
    for (const g of groups(s)) {
      if (!g.exactly || g.members.some((m) => out[m] !== undefined)) continue;
      const first = g.members[0] ?? "";
      out[first] = sample(s.properties[first], `${path}.${first}`, variant);
    }
    return repaired(s, out, path, variant);
  }

  /**
   * `obj` with optional fields added, then fields other than `keep` removed, one at a time, while that reduces the rules
   * it breaks ("port is required when ...", "audience is only valid with type IdToken", "conditional or the fields").
   */
  function repaired(
    s: S,
    obj: Record<string, Json>,
    path: string,
    variant: 0 | 1,
    keep?: string,
  ): Record<string, Json> {
    let failing = broken(s, obj).length;
    // Every field with the first value, then with the second (so a Service reference gets its port, not another kind).
    for (const v of [variant, variant === 0 ? 1 : 0] as const) {
      for (const k of Object.keys(s.properties ?? {})) {
        if (failing === 0) break;
        if (obj[k] !== undefined) continue;
        obj[k] = sample(s.properties[k], `${path}.${k}`, v);
        const now = broken(s, obj).length;
        if (now < failing) failing = now;
        else delete obj[k];
      }
    }
    for (const k of Object.keys(obj)) {
      if (failing === 0) break;
      if (k === keep || (s.required ?? []).includes(k)) continue;
      const v = obj[k];
      delete obj[k];
      const now = broken(s, obj).length;
      if (now < failing) failing = now;
      else obj[k] = v;
    }
    // Another member of an exactly-one group ("promptCaching applies only to providerG": providerA becomes providerG).
    for (const g of groups(s).filter((x) => x.exactly)) {
      const present = g.members.find((m) => obj[m] !== undefined);
      if (failing === 0 || present === undefined || present === keep) continue;
      for (const m of g.members) {
        if (m === present) continue;
        const was = obj[present];
        delete obj[present];
        obj[m] = sample(s.properties[m], `${path}.${m}`, variant);
        const now = broken(s, obj).length;
        if (now < failing) {
          failing = now;
          break;
        }
        delete obj[m];
        obj[present] = was;
      }
    }
    if (failing > 0) {
      // Two fields at once ("unixPath is exclusive with host and port"): every optional one but `keep` goes.
      const only = Object.fromEntries(
        Object.entries(obj).filter(([k]) => k === keep || (s.required ?? []).includes(k)),
      );
      if (broken(s, only).length < failing) {
        for (const k of Object.keys(obj)) delete obj[k];
        Object.assign(obj, only);
      }
    }
    return obj;
  }

  /**
   * `root` with the field at `segments` set to `value` (undefined: absent), creating the enclosing objects at their
   * minimal value. Returns undefined when the field cannot be absent (required, or the one member of its group).
   */
  function place(schema: S, root: Record<string, Json>, segments: string[], value: Json) {
    const out = clone(root);
    let node: Record<string, Json> = out;
    let s = schema;
    let path = "";
    /** Each enclosing object, its schema, path and the key the probe goes through, deepest last. */
    const chain: { s: S; node: Record<string, Json>; path: string; key: string }[] = [];
    for (const [i, seg] of segments.entries()) {
      const array = seg.endsWith("[]");
      const key = array ? seg.slice(0, -2) : seg;
      const child = s.properties?.[key];
      assert.ok(child !== undefined, `no field ${key} at ${path}`);
      chain.push({ s, node, path, key });
      clearGroups(s, node, key);
      path = path === "" ? key : `${path}.${key}`;
      if (i === segments.length - 1) {
        node[key] = value;
        break;
      }
      if (array) {
        const list = Array.isArray(node[key]) ? (node[key] as Json[]) : [minimal(child.items, `${path}[]`, 0)];
        node[key] = list;
        node = list[0] as Record<string, Json>;
        s = child.items;
        path = `${path}[]`;
      } else {
        if (!isObj(node[key])) node[key] = minimal(child, path, 0);
        node = node[key] as Record<string, Json>;
        s = child;
      }
    }
    // The probe's field may need a sibling, or exclude one, anywhere up the chain.
    for (const c of chain.reverse()) repaired(c.s, c.node, c.path, 0, c.key);
    return out;
  }

  const validated = new Map<object, ReturnType<typeof validateResource>>();

  function translateDocs(docs: Json[]): { output?: Output; problems?: string } {
    const resources: Resource[] = [];
    for (const d of docs) {
      // The world's own documents are the same objects in every probe: validated once.
      const v = validated.get(d as object) ?? validateResource(d);
      if (world.includes(d)) validated.set(d as object, v);
      if (v.resource === undefined) {
        const m = d as { kind: string; metadata: { name: string } };
        return {
          problems: `${m.kind} ${m.metadata.name}: ${v.problems.map((p) => `${p.path}: ${p.message}`).join("; ")}`,
        };
      }
      resources.push(v.resource);
    }
    const r = translate(makeInput(resources), { impliedGatewayClass: true });
    const reach = JSON.stringify(
      {
        xds: r.gateways.map((g) => xdsToJson(g.xds)),
        extAuthz: [...r.extAuthzPolicies],
        llm: [...r.llm.entries.values()],
        mcp: [...r.mcp.entries],
      },
      (_, v) => (typeof v === "bigint" ? v.toString() : v),
    );
    return { output: { reach, statuses: reports(r.statuses) } };
  }

  /**
  /** Probes every leaf of `schema` under `roots` in each context where the field is valid; returns what reaches nothing. */
  function walk(
    schema: S,
    roots: readonly string[],
    contexts: readonly Context[],
    prefixes: readonly string[],
  ): Drop[] {
    const drops: Drop[] = [];
    for (const segments of leaves(schema)) {
      const path = segments.join(".");
      if (!roots.some((r) => path === r || path.startsWith(`${r}.`) || path.startsWith(`${r}[]`))) continue;
      if (
        Object.keys(allowed).some(
          (a) => norm(path) === a || norm(path).startsWith(`${a}.`) || norm(path).startsWith(`${a}[]`),
        )
      ) {
        continue;
      }
      let valid = 0;
      const problems: string[] = [];
      for (const ctx of contexts) {
        const leafSchema = segments.reduce<S>((s, seg) => {
          const key = seg.replace(/\[\]$/, "");
          const c = s.properties[key];
          return seg.endsWith("[]") ? c.items : c;
        }, schema);
        // Two probes (both values of an enum, say) against the field absent; where it cannot be absent, against each
        // other, or against the context's own value (an empty variant such as dynamicForwardProxy: {}).
        const v0 = sample(leafSchema, path, 0);
        const v1 = sample(leafSchema, path, 1);
        const probes = [place(schema, ctx.base, segments, v0), place(schema, ctx.base, segments, v1)];
        const [first] = probes as [Record<string, Json>];
        const baseline =
          without(schema, first, segments) ?? (JSON.stringify(v0) === JSON.stringify(v1) ? clone(ctx.base) : probes[1]);
        const b = translateDocs(ctx.docs(baseline as Record<string, Json>));
        let reached = false;
        let tried = 0;
        for (const probe of probes) {
          if (probe === baseline) continue;
          const a = translateDocs(ctx.docs(probe));
          if (a.output === undefined || b.output === undefined) {
            problems.push(`${ctx.name}: ${a.problems ?? b.problems}`);
            continue;
          }
          tried++;
          if (a.output.reach !== b.output.reach || named(a.output.statuses, path, prefixes, 2)) {
            reached = true;
            break;
          }
        }
        if (tried === 0) continue;
        valid++;
        // A field with one valid value (a Secret reference's kind; a reference's group, set by its kind) has nothing to
        // serve: it reaches the validator, which must refuse another value naming the field.
        const other = Array.isArray(leafSchema.enum) && leafSchema.enum.length === 1 ? "Other" : undefined;
        const another = other ?? (norm(path).endsWith("Ref.group") ? "example.com" : undefined);
        if (!reached && another !== undefined) {
          const refused = translateDocs(ctx.docs(place(schema, ctx.base, segments, another))).problems ?? "";
          reached = norm(refused).includes(`${norm(path)}: `);
        }
        if (!reached) drops.push({ field: path, context: ctx.name, why: "no xDS, table or status difference" });
      }
      if (valid === 0) drops.push({ field: path, context: "-", why: `no valid probe: ${problems.join(" | ")}` });
    }
    return drops;
  }

  return { sample, place, translateDocs, walk };
}

/** The drops not in `known` (each a pattern over the normalised path, with why), as lines to compare with []. */
export function unexpected(drops: readonly Drop[], known: readonly (readonly [RegExp, string])[]): string[] {
  return drops
    .filter((d) => !known.some(([re]) => re.test(norm(d.field))))
    .map((d) => `${d.field} (${d.context}): ${d.why}`);
}
