// The floor of bench/llm.ts: an ext_proc processor that answers every message with an empty response (no mutation),
// on the same HTTP/2 server Sluice's LLM ext_proc runs on (src/grpc/unary-server.ts), in a process of its own.
// What Envoy and the host spend on the ext_proc exchange itself, with no translation. Prints the port it listens on.

import { type BidiHandler, UnaryGrpcServer } from "../src/grpc/unary-server.js";

// ProcessingRequest's oneof fields 2..7 (request_headers .. response_trailers) are answered by ProcessingResponse's
// fields 1..6 of the same kind; an empty message of that field is "continue unchanged".
const replies = new Map<number, Uint8Array>();
for (let field = 2; field <= 7; field++) replies.set(field, new Uint8Array([((field - 1) << 3) | 2, 0]));

/** The oneof field of a ProcessingRequest: the first length-delimited field numbered 2..7. */
function phaseOf(m: Uint8Array): number | undefined {
  let i = 0;
  while (i < m.length) {
    const tag = m[i++]!;
    const field = tag >> 3;
    if ((tag & 7) !== 2) return undefined;
    if (field >= 2 && field <= 7) return field;
    let len = 0;
    for (let shift = 0; ; shift += 7) {
      const b = m[i++]!;
      len += (b & 0x7f) * 2 ** shift;
      if ((b & 0x80) === 0) break;
    }
    i += len;
  }
  return undefined;
}

const process_: BidiHandler = (call) => {
  call.on("data", (m) => {
    const reply = replies.get(phaseOf(m) ?? 0);
    if (reply !== undefined) call.write(reply);
  });
  call.on("end", () => call.end());
  call.on("error", () => {});
};

const server = new UnaryGrpcServer(
  new Map(),
  new Map([["/envoy.service.ext_proc.v3.ExternalProcessor/Process", process_]]),
);
const port = await server.start("127.0.0.1", 0);
process.stdout.write(`${port}\n`);
process.on("SIGTERM", () => void server.stop().then(() => process.exit(0)));
