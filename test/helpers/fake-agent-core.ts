// A local stand-in for the cloudA agent runtime's data plane (InvokeAgentRuntime), speaking its wire format and
// checking what the real endpoint checks:
// - `POST /runtimes/<ARN, percent-encoded as one path segment>/invocations[?qualifier=<endpoint>]`; an ARN not
//   encoded (its `/` read as a path separator) or a runtime it does not host is a 404 ResourceNotFoundException;
// - a runtime with IAM auth takes SigV4 only: service `bedrock-agentcore`, the ARN's region, every signed header and
//   the body's hash checked, the signature recomputed with the AWS SDK's own signer (@smithy/signature-v4), not
//   Sluice's; a runtime with an OAuth authorizer takes `Authorization: Bearer` with a token it issued, nothing else;
// - `X-Amzn-Bedrock-AgentCore-Runtime-Session-Id` of 33 to 256 characters (ValidationException otherwise), echoed
//   in the response as the service does.
// The agent answers JSON, or, when the payload asks `{"stream": n}`, `text/event-stream` events one at a time; the
// last is held until the test releases it, so a test can see the first before the runtime has finished.

import { createHash } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Sha256 } from "@aws-crypto/sha256-js";
import { SignatureV4 } from "@smithy/signature-v4";
import type { AwsCredentials } from "../../src/llm/codec/sigv4.js";

export interface AgentRuntime {
  readonly arn: string;
  /** `iam`: SigV4; `oauth`: bearer tokens in `tokens`. */
  readonly auth: "iam" | "oauth";
  readonly tokens?: ReadonlySet<string>;
}

export interface InvocationSeen {
  readonly arn: string;
  readonly qualifier?: string;
  readonly session: string;
  /** Path and query as received. */
  readonly rawPath: string;
  readonly headers: IncomingMessage["headers"];
  readonly body: string;
  /** The access key of a SigV4 request, or `bearer`. */
  readonly signer: string;
}

export interface FakeAgentCore {
  readonly url: string;
  readonly port: number;
  readonly invocations: InvocationSeen[];
  /** Refused requests: status and the service's error type. */
  readonly refused: { status: number; type: string; message: string }[];
  /** Releases the held last event of every open stream. */
  release(): void;
  close(): Promise<void>;
}

const SESSION = "x-amzn-bedrock-agentcore-runtime-session-id";
const ARN = /^arn:aws[a-z-]*:bedrock-agentcore:([a-z0-9-]+):\d{12}:runtime\/[A-Za-z][A-Za-z0-9_-]*$/;

export async function startFakeAgentCore(
  runtimes: readonly AgentRuntime[],
  lookup: (accessKeyId: string) => AwsCredentials | undefined,
): Promise<FakeAgentCore> {
  const invocations: InvocationSeen[] = [];
  const refused: FakeAgentCore["refused"] = [];
  let held: (() => void)[] = [];
  const fail = (res: ServerResponse, status: number, type: string, message: string) => {
    refused.push({ status, type, message });
    res.writeHead(status, { "content-type": "application/json", "x-amzn-errortype": type });
    res.end(JSON.stringify({ message }));
  };

  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      void handle(req, res, Buffer.concat(chunks)).catch((e: unknown) =>
        fail(res, 500, "InternalServerException", (e as Error).message),
      );
    });
  });

  async function handle(req: IncomingMessage, res: ServerResponse, body: Buffer): Promise<void> {
    const rawPath = req.url ?? "/";
    const url = new URL(rawPath, "http://x");
    const m = /^\/runtimes\/([^/]+)\/invocations$/.exec(url.pathname);
    if (req.method !== "POST" || m === null) return fail(res, 404, "UnknownOperationException", "unknown operation");
    const arn = decodeURIComponent(m[1] as string);
    const runtime = runtimes.find((r) => r.arn === arn);
    const region = ARN.exec(arn)?.[1];
    if (runtime === undefined || region === undefined) {
      return fail(res, 404, "ResourceNotFoundException", `no agent runtime ${arn}`);
    }
    const auth = String(req.headers.authorization ?? "");
    let signer: string;
    if (runtime.auth === "oauth") {
      const token = /^Bearer (\S+)$/.exec(auth)?.[1];
      if (token === undefined || !(runtime.tokens?.has(token) ?? false)) {
        return fail(res, 403, "AccessDeniedException", "Authorization method mismatch or invalid bearer token");
      }
      signer = "bearer";
    } else {
      const check = await verify(req, rawPath, body, region, lookup);
      if ("error" in check) return fail(res, 403, "AccessDeniedException", check.error);
      signer = check.ok;
    }
    const session = String(req.headers[SESSION] ?? "");
    if (session.length < 33 || session.length > 256) {
      return fail(res, 400, "ValidationException", "runtimeSessionId must be 33 to 256 characters");
    }
    const qualifier = url.searchParams.get("qualifier") ?? undefined;
    const text = body.toString("utf8");
    invocations.push({
      arn,
      ...(qualifier !== undefined ? { qualifier } : {}),
      session,
      rawPath,
      headers: req.headers,
      body: text,
      signer,
    });
    let payload: Record<string, unknown> = {};
    try {
      payload = JSON.parse(text) as Record<string, unknown>;
    } catch {
      // An opaque payload is the agent's business; it is echoed.
    }
    const common = { [SESSION]: session, "x-amzn-requestid": `req-${invocations.length}` };
    if (typeof payload.stream === "number") {
      res.writeHead(200, { ...common, "content-type": "text/event-stream" });
      const n = payload.stream;
      for (let i = 1; i < n; i++) res.write(`data: ${JSON.stringify({ chunk: i })}\n\n`);
      held.push(() => res.end(`data: ${JSON.stringify({ chunk: n, done: true })}\n\n`));
      return;
    }
    res.writeHead(200, { ...common, "content-type": "application/json" });
    res.end(JSON.stringify({ runtime: arn, qualifier: qualifier ?? "DEFAULT", session, prompt: payload.prompt }));
  }

  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    invocations,
    refused,
    release() {
      const h = held;
      held = [];
      for (const f of h) f();
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const f of held) f();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** SigV4 as the service checks it, recomputed by the AWS SDK's signer over the headers the request says it signed. */
async function verify(
  req: IncomingMessage,
  rawPath: string,
  body: Buffer,
  region: string,
  lookup: (accessKeyId: string) => AwsCredentials | undefined,
): Promise<{ ok: string } | { error: string }> {
  const auth = String(req.headers.authorization ?? "");
  const m =
    /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request, ?SignedHeaders=([^,]+), ?Signature=([0-9a-f]{64})$/.exec(
      auth,
    );
  if (m === null) return { error: "missing or malformed SigV4 authorization" };
  const creds = lookup(m[1] as string);
  if (creds === undefined) return { error: "The security token included in the request is invalid" };
  if (m[3] !== region || m[4] !== "bedrock-agentcore")
    return { error: "Credential should be scoped to a valid region and service bedrock-agentcore" };
  const signed = (m[5] as string).split(";");
  for (const must of ["host", "x-amz-date"]) if (!signed.includes(must)) return { error: `${must} is not signed` };
  const token = req.headers["x-amz-security-token"];
  if (creds.sessionToken !== undefined && (token !== creds.sessionToken || !signed.includes("x-amz-security-token"))) {
    return { error: "missing, wrong or unsigned x-amz-security-token" };
  }
  if (creds.sessionToken === undefined && token !== undefined)
    return { error: "x-amz-security-token for long-term keys" };
  const hash = createHash("sha256").update(body).digest("hex");
  if (req.headers["x-amz-content-sha256"] !== undefined && req.headers["x-amz-content-sha256"] !== hash) {
    return { error: "x-amz-content-sha256 does not match the body" };
  }
  const amz = String(req.headers["x-amz-date"] ?? "");
  const date = new Date(
    `${amz.slice(0, 4)}-${amz.slice(4, 6)}-${amz.slice(6, 8)}T${amz.slice(9, 11)}:${amz.slice(11, 13)}:${amz.slice(13, 15)}Z`,
  );
  if (Number.isNaN(date.getTime()) || Math.abs(date.getTime() - Date.now()) > 5 * 60_000) {
    return { error: "Signature expired or x-amz-date malformed" };
  }
  const headers: Record<string, string> = {};
  for (const h of signed) {
    const v = req.headers[h];
    if (v === undefined) return { error: `signed header ${h} is missing` };
    headers[h] = Array.isArray(v) ? v.join(",") : v;
  }
  const q = rawPath.indexOf("?");
  const query: Record<string, string> = {};
  for (const [k, v] of new URLSearchParams(q < 0 ? "" : rawPath.slice(q + 1))) query[k] = v;
  const signer = new SignatureV4({ credentials: creds, region, service: "bedrock-agentcore", sha256: Sha256 });
  const want = await signer.sign(
    {
      method: req.method ?? "POST",
      protocol: "https:",
      hostname: String(req.headers.host ?? ""),
      path: q < 0 ? rawPath : rawPath.slice(0, q),
      query,
      headers,
      body,
    },
    { signingDate: date },
  );
  const expected = /Signature=([0-9a-f]{64})$/.exec(String(want.headers.authorization ?? ""))?.[1];
  return expected === m[6]
    ? { ok: creds.accessKeyId }
    : { error: "The request signature we calculated does not match the signature you provided" };
}
