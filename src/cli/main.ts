// The `sluice` command: dispatches to one module per subcommand.

import { COMMAND_HELP, closest, commandHelp, unknownOptionHint } from "./help.js";
import { type CommandIO, processIO } from "./io.js";

type Command = (argv: string[], io: CommandIO) => Promise<number>;

/**
 * Each command's module, loaded when that command runs: loading every module took a start 2 to 3 s of CPU (the
 * Kubernetes client alone is some 870 files, which only `controller` and the cluster modes of the others need), and a
 * gateway, a test or `--help` waited for it.
 */
const COMMANDS: Readonly<Record<string, () => Promise<Command>>> = {
  run: async () => (await import("./run.js")).runRun,
  controller: async () => (await import("./controller.js")).runController,
  serve: async () => (await import("./serve.js")).runServe,
  bootstrap: async () => (await import("./bootstrap.js")).runBootstrap,
  certificate: async () => (await import("./certificate.js")).runCertificate,
  translate: async () => (await import("./translate.js")).runTranslate,
  validate: async () => (await import("./validate.js")).runValidate,
  explain: async () => (await import("./explain.js")).runExplain,
  status: async () => (await import("./status.js")).runStatus,
  "ratelimit-config": async () => (await import("./ratelimit-config.js")).runRateLimitConfig,
};

function usage(): string {
  const lines = Object.keys(COMMANDS).map((name) => `  ${name.padEnd(12)} ${COMMAND_HELP[name]?.summary ?? ""}`);
  return `usage: sluice <command> [options]\n\ncommands:\n${lines.join("\n")}\n\nsluice <command> --help shows a command's options and examples; examples/ has a directory per use case.\n`;
}

/** Whether `argv` asks for help before any `--` (after which arguments are not options). */
function wantsHelp(argv: readonly string[]): boolean {
  for (const a of argv) {
    if (a === "--") return false;
    if (a === "--help" || a === "-h") return true;
  }
  return false;
}

const helpHint = (name: string) => `run \`sluice ${name} --help\` for its options and examples`;

/** A parse error of node:util's parseArgs, said with the fix. */
function parseErrorText(name: string, e: Error & { code?: string }): string | undefined {
  if (e.code === "ERR_PARSE_ARGS_UNKNOWN_OPTION") {
    const flag = /'([^']+)'/.exec(e.message)?.[1] ?? "";
    return `unknown option ${flag}; ${unknownOptionHint(name, flag)}${helpHint(name)}`;
  }
  if (e.code === "ERR_PARSE_ARGS_INVALID_OPTION_VALUE") return `${e.message.replace(/\.$/, "")}; ${helpHint(name)}`;
  if (e.code === "ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL")
    return `unexpected argument ${/'([^']+)'/.exec(e.message)?.[1] ?? ""}: files are given with -f <file|dir>; ${helpHint(name)}`;
  return undefined;
}

export async function main(argv: string[], io: CommandIO = processIO): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === "--help" || name === "-h") {
    io.stdout(usage());
    return name === undefined ? 2 : 0;
  }
  if (name === "help") {
    const topic = rest[0];
    const text = topic !== undefined ? commandHelp(topic) : usage();
    if (text === undefined) {
      io.stderr(`sluice help: unknown command "${topic}"\n${usage()}`);
      return 2;
    }
    io.stdout(text);
    return 0;
  }
  const load = COMMANDS[name];
  if (load === undefined) {
    const guess = closest(name, Object.keys(COMMANDS));
    io.stderr(
      `sluice: unknown command "${name}"${guess !== undefined ? `; did you mean \`sluice ${guess}\`?` : ""}\n${usage()}`,
    );
    return 2;
  }
  if (wantsHelp(rest)) {
    io.stdout(commandHelp(name) ?? usage());
    return 0;
  }
  try {
    const code = await (await load())(rest, io);
    // 2 is a usage error: the command said what was wrong; say where the right usage is.
    if (code === 2) io.stderr(`${helpHint(name)}\n`);
    return code;
  } catch (e) {
    const parse = parseErrorText(name, e as Error & { code?: string });
    if (parse !== undefined) {
      io.stderr(`sluice ${name}: ${parse}\n`);
      return 2;
    }
    // Bad flag values and the like; bugs still show their stack with SLUICE_DEBUG=1.
    io.stderr(
      `sluice ${name}: ${process.env["SLUICE_DEBUG"] ? (e as Error).stack : (e as Error).message}\n${helpHint(name)}\n`,
    );
    return 2;
  }
}
