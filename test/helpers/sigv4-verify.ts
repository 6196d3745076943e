// Checks the AWS Signature Version 4 of a request as an AWS service does: the Authorization header's access key is
// looked up, the canonical request is rebuilt from the headers it says were signed, and with temporary credentials the
// x-amz-security-token must be the one issued with the key and must be signed. Used by the fake STS (requests the AWS
// SDK signs) and the fake Bedrock (requests Sluice signs).

import type { AwsCredentials } from "../../src/llm/codec/sigv4.js";
import { signSigV4 } from "../../src/llm/codec/sigv4.js";

export interface SignedRequest {
  readonly method: string;
  /** Path and query as received. */
  readonly path: string;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly body: string;
}

export type SigV4Check = { readonly ok: AwsCredentials } | { readonly error: string };

/** `lookup` gives the credentials of an access key the service knows (undefined: unknown key). */
export function verifySigV4(
  req: SignedRequest,
  expect: { readonly region: string; readonly service: string },
  lookup: (accessKeyId: string) => AwsCredentials | undefined,
): SigV4Check {
  const auth = String(req.headers.authorization ?? "");
  const m =
    /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request, ?SignedHeaders=([^,]+), ?Signature=([0-9a-f]{64})$/.exec(
      auth,
    );
  if (m === null) return { error: "missing or malformed SigV4 authorization" };
  const creds = lookup(m[1] ?? "");
  if (creds === undefined) return { error: "unknown access key" };
  if (m[3] !== expect.region || m[4] !== expect.service) return { error: "wrong credential scope" };
  const signed = (m[5] ?? "").split(";");
  const token = req.headers["x-amz-security-token"];
  if (creds.sessionToken !== undefined) {
    if (token !== creds.sessionToken) return { error: "missing or wrong x-amz-security-token" };
    if (!signed.includes("x-amz-security-token")) return { error: "x-amz-security-token is not signed" };
  } else if (token !== undefined) {
    return { error: "x-amz-security-token for long-term credentials" };
  }
  const amzDate = String(req.headers["x-amz-date"] ?? "");
  if (amzDate.slice(0, 8) !== m[2]) return { error: "x-amz-date does not match the credential scope" };
  const date = new Date(
    `${amzDate.slice(0, 4)}-${amzDate.slice(4, 6)}-${amzDate.slice(6, 8)}T${amzDate.slice(9, 11)}:${amzDate.slice(11, 13)}:${amzDate.slice(13, 15)}Z`,
  );
  if (Number.isNaN(date.getTime()) || Math.abs(date.getTime() - Date.now()) > 15 * 60_000) {
    return { error: "x-amz-date missing or more than 15 minutes off" };
  }
  // The signer adds host, x-amz-date and x-amz-security-token itself; every other signed header is given to it.
  const headers: Record<string, string> = {};
  for (const h of signed) {
    if (h === "host" || h === "x-amz-date" || h === "x-amz-security-token") continue;
    const v = req.headers[h];
    headers[h] = Array.isArray(v) ? v.join(",") : String(v ?? "");
  }
  const q = req.path.indexOf("?");
  const want = signSigV4(
    {
      method: req.method,
      host: String(req.headers.host ?? ""),
      path: q < 0 ? req.path : req.path.slice(0, q),
      query: q < 0 ? "" : req.path.slice(q + 1),
      headers,
      body: req.body,
    },
    { region: expect.region, service: expect.service, credentials: creds, date },
  );
  return want.signature === m[6] ? { ok: creds } : { error: "signature does not match" };
}
