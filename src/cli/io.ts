// How commands write output, so tests can capture it.

export interface CommandIO {
  stdout(text: string): void;
  stderr(text: string): void;
}

export const processIO: CommandIO = {
  stdout: (t) => process.stdout.write(t),
  stderr: (t) => process.stderr.write(t),
};
