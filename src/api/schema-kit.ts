// Building blocks of the Sluice schemas. Every kind is written once with these (TypeBox, so `Static<>` gives the
// TypeScript type); the same objects drive the validator (./check.ts), the CRDs (./crd.ts) and the docs (./docs.ts).
// Only a structural subset of JSON Schema is used, which is exactly what apiextensions.k8s.io/v1 accepts.

import { type Static, type TObject, type TProperties, type TSchema, Type } from "@sinclair/typebox";
import type { StringFormat } from "./string-formats.js";

export type { Static, TSchema };

/**
 * A cross-field rule, written twice side by side: as Kubernetes CEL (`x-kubernetes-validations`, evaluated by the API
 * server) and as a TypeScript predicate (evaluated by `sluice validate` and the file source). The table-driven tests run
 * both on every case, so the two cannot drift apart.
 */
export interface Rule {
  readonly rule: string;
  readonly message: string;
  /** JSONPath of the field the message is about, relative to the object carrying the rule (e.g. `.port`). */
  readonly fieldPath?: string;
  /** True when the object satisfies the rule. Gets defaulted data that may still be malformed: never assume types. */
  readonly check: (self: Obj) => boolean;
  /** Where exactly the rule fails, relative like fieldPath (e.g. `.targetRefs[2]`); for the TypeScript side only. */
  readonly locate?: (self: Obj) => string | undefined;
}

/** What a rule's predicate sees: any value, read defensively. */
// biome-ignore lint/suspicious/noExplicitAny: rule predicates read arbitrary user data defensively.
export type Obj = any;

export interface Doc {
  readonly description?: string;
}

/** Keywords of ours, next to the standard ones. The CRD generator drops the `x-sluice-*` ones. */
export const FORMAT = "x-sluice-format"; // one of STRING_FORMATS (./string-formats.ts)
export const PATTERN_MESSAGE = "x-sluice-pattern-message";
export const DEPRECATED = "x-sluice-deprecated";
export const RULES = "x-kubernetes-validations";
export const LIST_TYPE = "x-kubernetes-list-type";
export const LIST_MAP_KEYS = "x-kubernetes-list-map-keys";

function doc(d: Doc | string | undefined): Doc {
  if (d === undefined) return {};
  return typeof d === "string" ? { description: d } : d;
}

export interface StrOpts extends Doc {
  readonly min?: number;
  readonly max?: number;
  readonly pattern?: string;
  readonly patternMessage?: string;
  readonly default?: string;
  readonly format?: StringFormat;
}

export function Str(o: StrOpts = {}) {
  return Type.String({
    ...(o.description !== undefined ? { description: o.description } : {}),
    ...(o.min !== undefined ? { minLength: o.min } : {}),
    ...(o.max !== undefined ? { maxLength: o.max } : {}),
    ...(o.pattern !== undefined ? { pattern: o.pattern } : {}),
    ...(o.patternMessage !== undefined ? { [PATTERN_MESSAGE]: o.patternMessage } : {}),
    ...(o.default !== undefined ? { default: o.default } : {}),
    ...(o.format !== undefined ? { [FORMAT]: o.format } : {}),
  });
}

export interface IntOpts extends Doc {
  readonly min?: number;
  readonly max?: number;
  readonly default?: number;
}

export function Int(o: IntOpts = {}) {
  const format = o.max !== undefined && o.max <= 2147483647 && (o.min ?? 0) >= -2147483648 ? "int32" : "int64";
  return Type.Integer({
    format,
    ...(o.description !== undefined ? { description: o.description } : {}),
    ...(o.min !== undefined ? { minimum: o.min } : {}),
    ...(o.max !== undefined ? { maximum: o.max } : {}),
    ...(o.default !== undefined ? { default: o.default } : {}),
  });
}

export function Bool(o: Doc & { readonly default?: boolean } = {}) {
  return Type.Boolean({
    ...(o.description !== undefined ? { description: o.description } : {}),
    ...(o.default !== undefined ? { default: o.default } : {}),
  });
}

export function Enum<const T extends readonly string[]>(values: T, o: Doc & { readonly default?: T[number] } = {}) {
  return Type.Unsafe<T[number]>({
    type: "string",
    enum: [...values],
    ...(o.description !== undefined ? { description: o.description } : {}),
    ...(o.default !== undefined ? { default: o.default } : {}),
  });
}

export interface ObjOpts extends Doc {
  readonly rules?: readonly Rule[];
  readonly deprecated?: string;
  readonly default?: unknown;
}

export function Obj<P extends TProperties>(props: P, o: ObjOpts | string = {}): TObject<P> {
  const opts: ObjOpts = typeof o === "string" ? { description: o } : o;
  return Type.Object(props, {
    ...(opts.description !== undefined ? { description: opts.description } : {}),
    ...(opts.rules !== undefined && opts.rules.length > 0 ? { [RULES]: opts.rules } : {}),
    ...(opts.deprecated !== undefined ? { [DEPRECATED]: opts.deprecated } : {}),
    ...(opts.default !== undefined ? { default: opts.default } : {}),
  });
}

export interface ArrOpts extends Doc {
  readonly min?: number;
  readonly max?: number;
  readonly rules?: readonly Rule[];
  readonly default?: readonly unknown[];
  /**
   * Entries are keyed by these (required, scalar) fields, which must be unique: Kubernetes' `x-kubernetes-list-type:
   * map`, checked by the API server itself at no CEL cost and by ./check.ts alike.
   */
  readonly mapKeys?: readonly string[];
  /** Scalar entries that must be unique: `x-kubernetes-list-type: set`. */
  readonly set?: boolean;
}

export function Arr<T extends TSchema>(items: T, o: ArrOpts | string = {}) {
  const opts: ArrOpts = typeof o === "string" ? { description: o } : o;
  return Type.Array(items, {
    ...(opts.description !== undefined ? { description: opts.description } : {}),
    ...(opts.min !== undefined ? { minItems: opts.min } : {}),
    ...(opts.max !== undefined ? { maxItems: opts.max } : {}),
    ...(opts.rules !== undefined && opts.rules.length > 0 ? { [RULES]: opts.rules } : {}),
    ...(opts.default !== undefined ? { default: opts.default } : {}),
    ...(opts.mapKeys !== undefined ? { [LIST_TYPE]: "map", [LIST_MAP_KEYS]: [...opts.mapKeys] } : {}),
    ...(opts.set === true ? { [LIST_TYPE]: "set" } : {}),
  });
}

/** A map from string keys to `value` (`additionalProperties` in the CRD). */
export function MapOf<T extends TSchema>(
  value: T,
  o: Doc & { readonly min?: number; readonly max?: number; readonly rules?: readonly Rule[] } = {},
) {
  return Type.Unsafe<Record<string, Static<T>>>({
    type: "object",
    additionalProperties: value,
    ...(o.rules !== undefined && o.rules.length > 0 ? { [RULES]: o.rules } : {}),
    ...(o.description !== undefined ? { description: o.description } : {}),
    ...(o.min !== undefined ? { minProperties: o.min } : {}),
    ...(o.max !== undefined ? { maxProperties: o.max } : {}),
  });
}

/** Any JSON value, kept as written. */
export function Json(d?: Doc | string) {
  return Type.Unsafe<unknown>({ "x-kubernetes-preserve-unknown-fields": true, ...doc(d) });
}

/**
 * A map of free-form JSON values in which the `reserved` keys are refused. Kubernetes CEL cannot see into a map of
 * arbitrary JSON (a rule reading its keys does not compile in the API server: "undefined field"), so the map is a JSON
 * object that declares the reserved keys as integer-or-string properties, which CEL can test with has(); every other
 * key is kept as written. A reserved key with another kind of value is refused by its type instead.
 */
export function JsonMapWithout(
  reserved: readonly string[],
  o: Doc & { readonly min?: number; readonly message: string; readonly reservedDescription: string },
) {
  const props = Object.fromEntries(
    reserved.map((k) => [k, { "x-kubernetes-int-or-string": true, description: o.reservedDescription }]),
  );
  const rule: Rule = {
    rule: reserved.map((k) => `!has(self.${k})`).join(" && "),
    message: o.message,
    check: (self) => !reserved.some((k) => has(self, k)),
  };
  return Type.Unsafe<Record<string, unknown>>({
    type: "object",
    "x-kubernetes-preserve-unknown-fields": true,
    properties: props,
    [RULES]: [rule],
    ...(o.description !== undefined ? { description: o.description } : {}),
    ...(o.min !== undefined ? { minProperties: o.min } : {}),
  });
}

/** A JSON object of free form (overlays, raw config, core Kubernetes types Sluice passes through). */
export function JsonObject(d?: Doc | string) {
  return Type.Unsafe<Record<string, unknown>>({
    type: "object",
    "x-kubernetes-preserve-unknown-fields": true,
    ...doc(d),
  });
}

/** An object with no fields of its own (`passthrough: {}`, `cloudA: {}`, `dynamicForwardProxy: {}`). */
export function Empty(d?: Doc | string) {
  return Type.Object({}, doc(d));
}

export function withDoc<T extends TSchema>(schema: T, description: string): T {
  return { ...schema, description };
}

export const Opt = Type.Optional;

// ---- rule builders: each yields the CEL text and the equivalent predicate ----

function isObj(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** `has()` for a field of a parsed document: present and not null. */
export function has(v: unknown, field: string): boolean {
  return isObj(v) && v[field] !== undefined && v[field] !== null;
}

function list(fields: readonly string[]): string {
  if (fields.length <= 2) return fields.join(" and ");
  return `${fields.slice(0, -1).join(", ")} and ${fields[fields.length - 1]}`;
}

function countCel(fields: readonly string[]): string {
  return fields.map((f) => `(has(self.${f}) ? 1 : 0)`).join(" + ");
}

function count(self: unknown, fields: readonly string[]): number {
  let n = 0;
  for (const f of fields) if (has(self, f)) n++;
  return n;
}

export function exactlyOne(fields: readonly string[], message?: string): Rule {
  return {
    rule: `${countCel(fields)} == 1`,
    message: message ?? `exactly one of ${list(fields)} must be set`,
    check: (self) => count(self, fields) === 1,
  };
}

export function atMostOne(fields: readonly string[], message?: string): Rule {
  return {
    rule: `${countCel(fields)} <= 1`,
    message: message ?? `at most one of ${list(fields)} may be set`,
    check: (self) => count(self, fields) <= 1,
  };
}

/** `field` may only be set together with `other`. */
export function requires(field: string, other: string, message?: string): Rule {
  return {
    rule: `!has(self.${field}) || has(self.${other})`,
    message: message ?? `${field} requires ${other}`,
    fieldPath: `.${field}`,
    check: (self) => !has(self, field) || has(self, other),
  };
}

export function rule(r: Rule): Rule {
  return r;
}
