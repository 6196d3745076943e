// The webhook guard (Document 2, prompt guard `webhook`; the protocol is Sluice's, docs/llm.md "Prompt guards"):
//   POST / HTTP/1.1, content-type: application/json, plus the headers of `headers` (CEL) and the client request's
//   headers selected by `forwardHeaderMatches`
//   {"direction": "request" | "response", "texts": ["...", ...]}
// answered 200 with one of
//   {"action": "pass"}
//   {"action": "mask", "texts": ["...", ...]}      (as many texts as were sent, in order)
//   {"action": "reject", "reason": "..."}          (the reason is logged, never shown to the client)
// Anything else (another status, a body that is none of these, no answer within the timeout) is a GuardError: the
// guard's failureMode decides.

import { Agent, request } from "node:http";
import type { HeaderMatchSpec, WebhookGuardSpec } from "../../../translate/llm/guards.js";
import { linearRegex } from "../../../translate/llm/linear-regex.js";
import { evaluateText } from "../cel.js";
import { GuardError, type GuardInput, type GuardVerdict, type RemoteGuard } from "./types.js";

/** The longest answer read from a webhook: masked texts of a large request, not more. */
const MAX_ANSWER_BYTES = 8 * 1024 * 1024;
const agent = new Agent({ keepAlive: true, maxSockets: 256 });

function headerMatches(m: HeaderMatchSpec, value: string): boolean {
  if (m.type === "Exact") return value === m.value;
  const c = linearRegex(m.value);
  if (!("ok" in c)) return false;
  c.ok.lastIndex = 0;
  const r = c.ok.exec(value);
  return r !== null && r.index === 0 && r[0].length === value.length;
}

function verdictOf(answer: unknown, count: number): GuardVerdict {
  if (typeof answer !== "object" || answer === null) throw new GuardError("webhook answer is not a JSON object");
  const a = answer as Record<string, unknown>;
  if (a.action === "pass") return { action: "pass" };
  if (a.action === "reject") return { action: "reject", reason: typeof a.reason === "string" ? a.reason : "" };
  if (a.action === "mask") {
    const texts = a.texts;
    if (!Array.isArray(texts) || texts.length !== count || !texts.every((t) => typeof t === "string")) {
      throw new GuardError(`webhook mask answer must carry ${count} texts`);
    }
    return { action: "mask", texts: texts as string[] };
  }
  throw new GuardError("webhook answer has no valid action (pass, mask or reject)");
}

/** Round robin over a webhook's endpoints, by service. */
const turns = new Map<string, number>();

export class WebhookGuard implements RemoteGuard {
  constructor(
    readonly spec: WebhookGuardSpec,
    /** CEL activation of `headers` (request, llm and the identity variables). */
    readonly vars: () => Record<string, unknown>,
  ) {}

  check(input: GuardInput, signal: AbortSignal): Promise<GuardVerdict> {
    const { spec } = this;
    const turn = turns.get(spec.service) ?? 0;
    turns.set(spec.service, turn + 1);
    const target = spec.targets[turn % Math.max(1, spec.targets.length)];
    if (target === undefined) return Promise.reject(new GuardError(`webhook ${spec.service} has no endpoint`));
    const headers: Record<string, string> = { "content-type": "application/json" };
    for (const m of spec.forwardHeaderMatches) {
      const v = input.headers.get(m.name);
      if (v !== undefined && headerMatches(m, v)) headers[m.name] = v;
    }
    if (spec.headers.length > 0) {
      const vars = this.vars();
      for (const [name, expr] of spec.headers) {
        const v = evaluateText(expr, vars);
        if (v !== undefined && v !== null) headers[name] = typeof v === "string" ? v : JSON.stringify(v);
      }
    }
    const body = JSON.stringify({ direction: input.direction, texts: input.texts });
    headers["content-length"] = String(Buffer.byteLength(body));
    return new Promise<GuardVerdict>((resolve, reject) => {
      const req = request(
        { host: target.host, port: target.port, method: "POST", path: "/", headers, agent, signal },
        (res) => {
          const chunks: Buffer[] = [];
          let size = 0;
          res.on("data", (c: Buffer) => {
            size += c.byteLength;
            if (size > MAX_ANSWER_BYTES) {
              res.destroy();
              reject(new GuardError(`webhook ${spec.service} answer is too large`));
              return;
            }
            chunks.push(c);
          });
          res.on("error", (e) => reject(new GuardError(`webhook ${spec.service}: ${e.message}`)));
          res.on("end", () => {
            if (res.statusCode !== 200) {
              reject(new GuardError(`webhook ${spec.service} answered HTTP ${String(res.statusCode)}`));
              return;
            }
            try {
              resolve(verdictOf(JSON.parse(Buffer.concat(chunks).toString("utf8")), input.texts.length));
            } catch (e) {
              reject(e instanceof GuardError ? e : new GuardError(`webhook ${spec.service} answer is not JSON`));
            }
          });
        },
      );
      req.on("error", (e) =>
        reject(new GuardError(`webhook ${spec.service}: ${signal.aborted ? "timed out" : e.message}`)),
      );
      req.end(body);
    });
  }
}
