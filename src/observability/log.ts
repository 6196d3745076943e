// Sluice's logs, through pino: one root logger, a child per module with its own level (`--log-level info,xds=debug`),
// written as JSON (a cluster's log collector), pretty (a person at a terminal) or text (the message and its fields on
// one line, what `sluice serve` printed before and what tests read). A line written while a request is handled
// carries that request's trace id or request id (context.ts), whichever code wrote it.

import { Writable } from "node:stream";
import pino, { type Level, type Logger } from "pino";
import pretty from "pino-pretty";
import { currentRequest } from "./context.js";

export type LogFormat = "json" | "pretty" | "text";
export const LOG_FORMATS: readonly LogFormat[] = ["json", "pretty", "text"];
const LEVELS: readonly string[] = ["trace", "debug", "info", "warn", "error", "fatal", "silent"];

export interface LevelSpec {
  readonly level: Level | "silent";
  readonly modules: ReadonlyMap<string, Level | "silent">;
}

/** `info`, `info,xds=debug`, `xds=debug` (others at info): a value, or a message saying what would be valid. */
export function parseLevelSpec(spec: string): LevelSpec | string {
  let level: Level | "silent" = "info";
  const modules = new Map<string, Level | "silent">();
  for (const part of spec.split(",")) {
    const item = part.trim();
    if (item === "") continue;
    const eq = item.indexOf("=");
    const name = eq < 0 ? undefined : item.slice(0, eq).trim();
    const value = (eq < 0 ? item : item.slice(eq + 1)).trim().toLowerCase();
    if (!LEVELS.includes(value))
      return `--log-level: "${value}" is not a level; use one of ${LEVELS.join(", ")}, e.g. info,xds=debug`;
    if (name === undefined) level = value as Level;
    else if (name === "") return `--log-level: "${item}" names no module; write <module>=<level>, e.g. xds=debug`;
    else modules.set(name, value as Level);
  }
  return { level, modules };
}

export interface LogConfig {
  readonly levels: LevelSpec;
  readonly format: LogFormat;
  /** Where lines go (default stderr). */
  readonly write?: (line: string) => void;
}

const RESERVED = new Set(["level", "time", "pid", "hostname", "module", "msg"]);

/** The text format: the message, then each field as key=value (strings JSON-quoted), one line. */
export function textLine(json: string): string {
  let o: Record<string, unknown>;
  try {
    o = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return json;
  }
  let line = String(o["msg"] ?? "");
  for (const [k, v] of Object.entries(o)) {
    if (RESERVED.has(k) || v === undefined) continue;
    line += ` ${k}=${typeof v === "string" ? JSON.stringify(v) : JSON.stringify(v)}`;
  }
  return `${line}\n`;
}

function destination(format: LogFormat, write: ((line: string) => void) | undefined): pino.DestinationStream {
  if (format === "pretty") {
    const out = write ?? ((s: string) => process.stderr.write(s));
    return pretty({
      colorize: process.stderr.isTTY === true,
      sync: true,
      ignore: "pid,hostname",
      translateTime: "HH:MM:ss.l",
      messageKey: "msg",
      destination: new Writable({
        write(chunk: Buffer, _enc, cb) {
          out(chunk.toString());
          cb();
        },
      }),
    });
  }
  if (format === "text") {
    const out = write ?? ((s: string) => process.stderr.write(s));
    return { write: (s: string) => out(textLine(s)) };
  }
  if (write !== undefined) return { write };
  return pino.destination({ dest: 2, sync: true });
}

let config: LogConfig = { levels: { level: "info", modules: new Map() }, format: "text" };
let root: Logger = build(config);
const children = new Map<string, Logger>();

function build(c: LogConfig): Logger {
  return pino(
    {
      level: "trace",
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      // The request being handled, if any: its trace id (Envoy's traceparent) or the id Sluice gave it.
      mixin() {
        const r = currentRequest();
        if (r === undefined) return {};
        return r.traceId !== undefined ? { trace_id: r.traceId, span_id: r.spanId } : { request_id: r.requestId };
      },
    },
    destination(c.format, c.write),
  );
}

/** Sets the levels, format and destination; loggers handed out before keep working with the new settings. */
export function configureLogging(c: LogConfig): void {
  config = c;
  root = build(c);
  children.clear();
}

export function logConfig(): LogConfig {
  return config;
}

/** The logger of one module (`xds`, `llm`, `authz`, ...), at the module's level. */
export function moduleLogger(module: string): Logger {
  let l = children.get(module);
  if (l === undefined) {
    l = root.child({ module }, { level: config.levels.modules.get(module) ?? config.levels.level });
    children.set(module, l);
  }
  return l;
}

/** Whether `module` writes lines at `level` (skip building a costly message otherwise). */
export function enabled(module: string, level: Level): boolean {
  return moduleLogger(module).isLevelEnabled(level);
}

/** A debug line of `module` about the request being handled (it gets the request's ids); nothing below debug. */
export function requestDebug(module: string, fields: Record<string, unknown>, message: string): void {
  const l = moduleLogger(module);
  if (l.isLevelEnabled("debug")) l.debug(fields, message);
}

// The services and the server write through `log(line)` callbacks, each line starting with what wrote it. Those lines
// are sorted into modules by that prefix, and given a level by what they say.
const PREFIXES: readonly (readonly [string, string])[] = [
  ["xds", "xds"],
  ["ext_authz", "authz"],
  ["extAuth", "authz"],
  ["llm", "llm"],
  ["mcp", "mcp"],
  ["gRPC server", "grpc"],
  ["kube", "kube"],
  ["envoy[", "envoy"],
  ["sluice controller", "kube"],
];

export function moduleOfLine(line: string): string {
  for (const [prefix, module] of PREFIXES) if (line.startsWith(prefix)) return module;
  return "sluice";
}

const ERROR = /\b(error|failed|fails|cannot|crash|rejected)\b/i;
const WARN = /\b(warning|denying|refused|not served|NotYetSupported|retrying|restarting|exited)\b/i;

export function levelOfLine(line: string): Level {
  if (WARN.test(line)) return "warn";
  if (ERROR.test(line)) return "error";
  return "info";
}

/** A `log(line)` callback for the existing plumbing: each line to its module's logger at the level it reads as. */
export function lineLogger(): (line: string) => void {
  return (line) => {
    const l = moduleLogger(moduleOfLine(line));
    const level = levelOfLine(line);
    if (l.isLevelEnabled(level)) l[level](line);
  };
}
