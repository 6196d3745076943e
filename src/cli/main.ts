// The `sluice` command: dispatches to one module per subcommand.

import { runBootstrap } from "./bootstrap.js";
import { runCertificate } from "./certificate.js";
import { runController } from "./controller.js";
import { runExplain } from "./explain.js";
import { type CommandIO, processIO } from "./io.js";
import { runRun } from "./run.js";
import { runServe } from "./serve.js";
import { runStatus } from "./status.js";
import { runTranslate } from "./translate.js";
import { runValidate } from "./validate.js";

type Command = (argv: string[], io: CommandIO) => Promise<number>;

const COMMANDS: Readonly<Record<string, { run: Command; help: string }>> = {
  run: { run: runRun, help: "serve -f <dir> and run Envoy for each Gateway in it (the embedded default)" },
  controller: {
    run: runController,
    help: "watch a Kubernetes cluster (--kubeconfig, or in-cluster), serve xDS, write status (Lease holder)",
  },
  serve: { run: runServe, help: "serve xDS (ADS) for the Gateways in -f <file|dir>, watching for changes" },
  bootstrap: { run: runBootstrap, help: "print the Envoy bootstrap for --gateway <ns>/<name> against `sluice serve`" },
  certificate: {
    run: runCertificate,
    help: "issue --gateway <ns>/<name>'s client certificate from the CA of `sluice serve --xds-ca <dir>`",
  },
  translate: { run: runTranslate, help: "print the xDS that would be served for -f <file|dir>" },
  validate: { run: runValidate, help: "check -f <file|dir> against the schemas; every problem as file:line: ..." },
  explain: { run: runExplain, help: "print the effective policy of --route <ns>/<name>[/<rule>] in -f <file|dir>" },
  status: { run: runStatus, help: "print resource status for -f <file|dir> (and --admin <url> xDS status)" },
};

function usage(): string {
  const lines = Object.entries(COMMANDS).map(([name, c]) => `  ${name.padEnd(10)} ${c.help}`);
  return `usage: sluice <command> [options]\n\ncommands:\n${lines.join("\n")}\n`;
}

export async function main(argv: string[], io: CommandIO = processIO): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === "help" || name === "--help" || name === "-h") {
    io.stdout(usage());
    return name === undefined ? 2 : 0;
  }
  const command = COMMANDS[name];
  if (command === undefined) {
    io.stderr(`sluice: unknown command "${name}"\n${usage()}`);
    return 2;
  }
  try {
    return await command.run(rest, io);
  } catch (e) {
    // Bad flags and the like; bugs still show their stack with SLUICE_DEBUG=1.
    io.stderr(`sluice ${name}: ${process.env["SLUICE_DEBUG"] ? (e as Error).stack : (e as Error).message}\n`);
    return 2;
  }
}
