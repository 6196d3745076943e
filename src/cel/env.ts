// The CEL environment of the policy spec: its variables, the Kubernetes IP/CIDR functions and the strings extension
// (strings.ts: the library's, with a linear `replace`),
// with compile-once / evaluate-many entry points that never throw on user input.
//
// @bufbuild/cel evaluates parsed (unchecked) expressions dynamically, so compile() adds the static checks a type
// checker would give the user at translation time: unknown variables and unknown functions are compile errors, with
// the position of the offending node.

import {
  type CelEnv,
  type CelFunc,
  type CelInput,
  CelScalar,
  type CelValue,
  celEnv,
  celMap,
  isCelError,
  parse,
  plan,
} from "@bufbuild/cel";
import type { Expr, ParsedExpr } from "@bufbuild/cel-spec/cel/expr/syntax_pb.js";
import type { Registry } from "@bufbuild/protobuf";
import { netFunctions, netRegistry, registerNetLiterals } from "./net.js";
import { specStrings } from "./strings.js";

/** The variables of the spec's CEL environment. */
export const SPEC_VARIABLES = ["request", "source", "jwt", "apiKey", "basicAuth", "extauthz", "llm"] as const;
export type SpecVariable = (typeof SPEC_VARIABLES)[number];

/** Limit from the spec's CELExpression type. */
export const MAX_EXPRESSION_LENGTH = 16384;

/** Identifiers that name types, valid anywhere in CEL (`type(x) == string`). */
const TYPE_IDENTS = new Set([
  "bool",
  "bytes",
  "double",
  "dyn",
  "int",
  "list",
  "map",
  "null_type",
  "string",
  "type",
  "uint",
]);

/** Operators handled by the planner itself rather than by the function resolver. */
const PLANNER_OPERATORS = new Set([
  "_[_]",
  "_[?_]",
  "_?._",
  "_?_:_",
  "_&&_",
  "_||_",
  "@not_strictly_false",
  "__not_strictly_false__",
]);

export interface CelPosition {
  /** 0-based character offset in the expression. */
  readonly offset: number;
  /** 1-based line and column. */
  readonly line: number;
  readonly column: number;
}

export interface CelProblem {
  readonly message: string;
  readonly position?: CelPosition;
}

/** A compiled expression: immutable, safe to share between requests and evaluate concurrently. */
export interface CompiledExpr {
  readonly source: string;
  /** Top-level variables the expression reads (comprehension variables excluded). */
  readonly variables: ReadonlySet<string>;
  /** The parsed AST, for the native (RBAC / Envoy CEL) rewrites. */
  readonly ast: ParsedExpr & { expr: Expr };
  /** @internal the planned evaluator. */
  readonly run: (ctx: Record<string, CelInput>) => CelValue | Error;
}

export type CompileResult = { readonly ok: CompiledExpr } | { readonly errors: readonly CelProblem[] };
export type EvalResult = { readonly value: CelValue } | { readonly error: string };

/** A CEL environment: variables plus functions. `specEnvironment` is the one policies use. */
export interface CelEnvironment {
  readonly variables: ReadonlySet<string>;
  readonly env: CelEnv;
}

export interface CelEnvironmentOptions {
  readonly variables: readonly string[];
  readonly funcs?: readonly CelFunc[];
  readonly registry?: Registry;
  /** Namespace (container) for qualified name resolution; used by the conformance tests. */
  readonly namespace?: string;
}

export function createCelEnvironment(options: CelEnvironmentOptions): CelEnvironment {
  const variables: Record<string, typeof CelScalar.DYN> = {};
  for (const v of options.variables) variables[v] = CelScalar.DYN;
  return {
    variables: new Set(options.variables),
    env: celEnv({
      variables,
      funcs: [...(options.funcs ?? [])],
      ...(options.registry ? { registry: options.registry } : {}),
      ...(options.namespace ? { namespace: options.namespace } : {}),
    }),
  };
}

/** The spec's environment: its variables, the strings extension and the Kubernetes IP/CIDR library. */
export const specEnvironment: CelEnvironment = specEnvironmentWith([]);

/** The spec's environment plus variables of one context (`response` where an answer is read). */
export function specEnvironmentWith(extra: readonly string[]): CelEnvironment {
  return createCelEnvironment({
    variables: [...SPEC_VARIABLES, ...extra],
    funcs: [...specStrings, ...netFunctions],
    registry: netRegistry,
  });
}

/** Parses, checks and plans an expression. Never throws. */
export function compileExpression(text: string, environment: CelEnvironment = specEnvironment): CompileResult {
  if (typeof text !== "string" || text.trim() === "") {
    return { errors: [{ message: "expression is empty" }] };
  }
  if (text.length > MAX_EXPRESSION_LENGTH) {
    return { errors: [{ message: `expression is ${text.length} characters long; at most ${MAX_EXPRESSION_LENGTH}` }] };
  }
  let ast: ParsedExpr & { expr: Expr };
  try {
    ast = parse(text);
  } catch (e) {
    return { errors: [parseProblem(text, e)] };
  }
  const problems: CelProblem[] = [];
  const variables = new Set<string>();
  try {
    checkExpr(ast.expr, new Set(), environment, variables, (id, message) => {
      const offset = ast.sourceInfo?.positions[id.toString()];
      problems.push(offset === undefined ? { message } : { message, position: positionAt(text, offset) });
    });
    if (problems.length > 0) return { errors: problems };
    // `cidr('10.0.0.0/8')` and `ip('...')` literals are parsed here once, not on every evaluation.
    registerNetLiterals(ast.expr);
  } catch (e) {
    // Both walk the tree recursively: a chain of thousands of operators (found by fuzzing) overflows the stack.
    if (!(e instanceof RangeError)) throw e;
    return { errors: [{ message: "expression is nested too deeply" }] };
  }
  let run: CompiledExpr["run"];
  try {
    run = plan(environment.env, ast) as CompiledExpr["run"];
  } catch (e) {
    return { errors: [{ message: `cannot plan expression: ${errorMessage(e)}` }] };
  }
  return { ok: { source: text, variables, ast, run } };
}

/** The top-level variables an expression reads, e.g. to warn that it reads `jwt` where no JWT authentication runs. */
export function referencedVariables(compiled: CompiledExpr): ReadonlySet<string> {
  return compiled.variables;
}

/** Evaluates a compiled expression. Never throws; a missing variable or field is an error, not an exception. */
export function evaluate(compiled: CompiledExpr, activation: CelActivation | PreparedActivation): EvalResult {
  let result: CelValue | Error;
  try {
    result = compiled.run(prepareActivation(activation).input);
  } catch (e) {
    return { error: errorMessage(e) };
  }
  if (isCelError(result) || result instanceof Error) return { error: result.message };
  return { value: result };
}

/** True only when the expression evaluates to boolean `true`; errors and non-booleans do not match (spec rule). */
export function matches(compiled: CompiledExpr, activation: CelActivation | PreparedActivation): boolean {
  try {
    return compiled.run(prepareActivation(activation).input) === true;
  } catch {
    return false;
  }
}

const PREPARED = Symbol("sluice.cel.prepared");

/**
 * An activation converted once into CEL values. @bufbuild/cel converts a plain object variable into a CEL map on
 * every access (Object.entries + a new Map), so an activation evaluated by several expressions is prepared first.
 */
export interface PreparedActivation {
  readonly [PREPARED]: true;
  readonly input: Record<string, CelInput>;
}

/** Converts an activation into CEL values (idempotent). Maps are wrapped, not copied. */
export function prepareActivation(activation: CelActivation | PreparedActivation): PreparedActivation {
  if (PREPARED in activation) return activation as PreparedActivation;
  const a = activation as CelActivation;
  const input: Record<string, CelInput> = {};
  for (const name in a) {
    const value = a[name];
    if (value === undefined) continue;
    if (name === "request") {
      const r = value as NonNullable<CelActivation["request"]>;
      input[name] = celMap(
        new Map<string, CelInput>([
          ["method", r.method],
          ["path", r.path],
          ["host", r.host],
          ["scheme", r.scheme],
          ["headers", celMap(r.headers as Map<string, string>)],
          ["query", celMap(r.query as Map<string, string>)],
          ...(r.body !== undefined ? [["body", r.body] as [string, CelInput]] : []),
        ]),
      );
    } else if (name === "source") {
      const s = value as NonNullable<CelActivation["source"]>;
      input[name] = celMap(
        new Map<string, CelInput>([
          ["address", s.address],
          ["port", s.port],
        ]),
      );
    } else if (isPlainObject(value)) {
      input[name] = celMap(new Map(Object.entries(value)) as Map<string, CelInput>);
    } else {
      input[name] = value as CelInput;
    }
  }
  return { [PREPARED]: true, input };
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  if (typeof v !== "object" || v === null) return false;
  const proto = Object.getPrototypeOf(v) as unknown;
  return proto === Object.prototype || proto === null;
}

/**
 * The activation: what a request exposes to CEL. A variable left undefined is absent, so any expression reading it
 * fails to evaluate (and so does not match), which is the spec's behaviour for `jwt` without JWT authentication.
 * Maps keyed by user-controlled strings should be `Map`s or null-prototype objects.
 */
export interface CelActivation {
  readonly request?: {
    readonly method: string;
    readonly path: string;
    readonly host: string;
    readonly scheme: string;
    /** keyed by lowercase header name; repeated headers joined with "," as Envoy does */
    readonly headers: ReadonlyMap<string, string>;
    readonly query: ReadonlyMap<string, string>;
    /** The request body as UTF-8, where a transformation has it sent (src/extproc/transformation.ts). */
    readonly body?: string;
  };
  readonly source?: { readonly address: CelInput; readonly port: bigint };
  readonly jwt?: CelInput;
  readonly apiKey?: CelInput;
  readonly basicAuth?: { readonly username: string };
  readonly extauthz?: CelInput;
  readonly llm?: CelInput;
  readonly [other: string]: unknown;
}

function checkExpr(
  expr: Expr,
  bound: ReadonlySet<string>,
  environment: CelEnvironment,
  used: Set<string>,
  report: (id: bigint, message: string) => void,
): void {
  const kind = expr.exprKind;
  switch (kind.case) {
    case "identExpr": {
      const name = kind.value.name;
      if (bound.has(name)) return;
      if (environment.variables.has(name)) {
        used.add(name);
        return;
      }
      if (TYPE_IDENTS.has(name) || resolvesAsQualified(name, environment)) return;
      report(expr.id, `undeclared reference to '${name}' (variables: ${[...environment.variables].join(", ")})`);
      return;
    }
    case "selectExpr": {
      // A dotted name can be a qualified type/function name (e.g. `google.protobuf.Int32Value`); let the runtime decide
      // when the root is not a variable but the whole name could resolve.
      const qualified = qualifiedName(expr);
      if (qualified !== undefined) {
        const root = qualified.split(".")[0]!;
        if (!bound.has(root) && !environment.variables.has(root) && resolvesAsQualified(qualified, environment)) {
          return;
        }
      }
      if (kind.value.operand) checkExpr(kind.value.operand, bound, environment, used, report);
      return;
    }
    case "callExpr": {
      const call = kind.value;
      const target = call.target;
      const qualified = target ? qualifiedName(target) : undefined;
      const qualifiedFn = qualified !== undefined ? `${qualified}.${call.function}` : undefined;
      const root = qualified?.split(".")[0];
      if (
        qualifiedFn !== undefined &&
        root !== undefined &&
        !bound.has(root) &&
        !environment.variables.has(root) &&
        findFunction(qualifiedFn, environment)
      ) {
        for (const a of call.args) checkExpr(a, bound, environment, used, report);
        return;
      }
      if (!PLANNER_OPERATORS.has(call.function) && !findFunction(call.function, environment)) {
        report(expr.id, `undeclared reference to function '${call.function}'`);
      }
      if (target) checkExpr(target, bound, environment, used, report);
      for (const a of call.args) checkExpr(a, bound, environment, used, report);
      return;
    }
    case "listExpr":
      for (const e of kind.value.elements) checkExpr(e, bound, environment, used, report);
      return;
    case "structExpr":
      for (const entry of kind.value.entries) {
        if (entry.keyKind.case === "mapKey") checkExpr(entry.keyKind.value, bound, environment, used, report);
        if (entry.value) checkExpr(entry.value, bound, environment, used, report);
      }
      return;
    case "comprehensionExpr": {
      const c = kind.value;
      if (c.iterRange) checkExpr(c.iterRange, bound, environment, used, report);
      if (c.accuInit) checkExpr(c.accuInit, bound, environment, used, report);
      const inner = new Set(bound);
      inner.add(c.iterVar);
      if (c.iterVar2) inner.add(c.iterVar2);
      inner.add(c.accuVar);
      for (const e of [c.loopCondition, c.loopStep, c.result]) {
        if (e) checkExpr(e, inner, environment, used, report);
      }
      return;
    }
    default:
      return;
  }
}

function findFunction(name: string, environment: CelEnvironment): boolean {
  for (const candidate of candidateNames(name, environment.env.namespace)) {
    if (environment.env.funcs.find(candidate) !== undefined) return true;
  }
  return false;
}

function resolvesAsQualified(name: string, environment: CelEnvironment): boolean {
  for (const candidate of candidateNames(name, environment.env.namespace)) {
    if (environment.env.registry.get(candidate) !== undefined) return true;
    const dot = candidate.lastIndexOf(".");
    // An enum value `pkg.Enum.VALUE`.
    if (dot > 0 && environment.env.registry.getEnum(candidate.slice(0, dot)) !== undefined) return true;
  }
  return false;
}

/** Namespace-relative candidates, innermost first, as CEL's name resolution does. */
function candidateNames(name: string, namespace: string): string[] {
  if (name.startsWith(".")) return [name.slice(1)];
  const out: string[] = [];
  let ns = namespace;
  while (ns !== "") {
    out.push(`${ns}.${name}`);
    const dot = ns.lastIndexOf(".");
    ns = dot < 0 ? "" : ns.slice(0, dot);
  }
  out.push(name);
  return out;
}

function qualifiedName(expr: Expr): string | undefined {
  const kind = expr.exprKind;
  if (kind.case === "identExpr") return kind.value.name;
  if (kind.case === "selectExpr" && !kind.value.testOnly && kind.value.operand) {
    const inner = qualifiedName(kind.value.operand);
    return inner === undefined ? undefined : `${inner}.${kind.value.field}`;
  }
  return undefined;
}

function parseProblem(text: string, e: unknown): CelProblem {
  const location = (e as { location?: { start?: { offset?: unknown } } } | null)?.location?.start?.offset;
  const raw = (e as { rawMessage?: unknown } | null)?.rawMessage;
  const message = `syntax error: ${typeof raw === "string" ? raw : errorMessage(e)}`;
  return typeof location === "number" ? { message, position: positionAt(text, location) } : { message };
}

function positionAt(text: string, offset: number): CelPosition {
  let line = 1;
  let lineStart = 0;
  for (let i = 0; i < offset && i < text.length; i++) {
    if (text.charCodeAt(i) === 10) {
      line++;
      lineStart = i + 1;
    }
  }
  return { offset, line, column: offset - lineStart + 1 };
}

function errorMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
