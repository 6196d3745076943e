// AWS Signature Version 4 for Bedrock, on Node's crypto. It has to run after the body is final (after translation and
// every body mutation), since the payload hash is part of the signature.
import { createHash, createHmac } from "node:crypto";

export interface AwsCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
}

export interface SigV4Request {
  method: string;
  host: string;
  /** The path as sent on the wire (already percent-encoded once, e.g. `/model/a.b-v1%3A0/converse`). */
  path: string;
  /** Raw query string without `?` (may be empty). */
  query?: string;
  /** Headers to sign besides host and x-amz-*; names in any case. */
  headers?: Readonly<Record<string, string>>;
  body: Uint8Array | string;
}

export interface SigV4Options {
  region: string;
  service: string;
  credentials: AwsCredentials;
  date: Date;
  /** Add `x-amz-content-sha256` (S3 needs it; Bedrock accepts it). */
  contentSha256Header?: boolean;
}

export interface SigV4Result {
  /** Headers to add to the request: authorization, x-amz-date, and x-amz-security-token / x-amz-content-sha256. */
  headers: Record<string, string>;
  canonicalRequest: string;
  stringToSign: string;
  signature: string;
}

const EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

export function sha256Hex(data: Uint8Array | string): string {
  if (typeof data === "string" ? data.length === 0 : data.byteLength === 0) return EMPTY_SHA256;
  return createHash("sha256").update(data).digest("hex");
}

/** RFC 3986 unreserved characters stay; everything else is %XX (uppercase), as SigV4 requires. */
function uriEncode(s: string): string {
  return encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

/** Non-S3 services sign the path encoded a second time, segment by segment, after dot-segment normalization. */
function canonicalPath(path: string): string {
  const out: string[] = [];
  for (const seg of path.split("/")) {
    if (seg === "" || seg === ".") continue;
    if (seg === "..") out.pop();
    else out.push(uriEncode(seg));
  }
  const trailing = path.endsWith("/") && out.length > 0 ? "/" : "";
  return `/${out.join("/")}${trailing}`;
}

function canonicalQuery(query: string): string {
  if (query === "") return "";
  const pairs = query
    .split("&")
    .filter((p) => p !== "")
    .map((p) => {
      const eq = p.indexOf("=");
      const k = eq < 0 ? p : p.slice(0, eq);
      const v = eq < 0 ? "" : p.slice(eq + 1);
      return [uriEncode(safeDecode(k)), uriEncode(safeDecode(v))] as const;
    });
  pairs.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0));
  return pairs.map(([k, v]) => `${k}=${v}`).join("&");
}

function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s.replace(/\+/g, "%20"));
  } catch {
    return s;
  }
}

function amzDate(d: Date): string {
  return d.toISOString().replace(/[:-]|\.\d{3}/g, "");
}

function hmac(key: Uint8Array | string, data: string): Buffer {
  return createHmac("sha256", key).update(data).digest();
}

/** Signing keys depend only on secret/date/region/service; caching them saves four HMACs per request. */
const keyCache = new Map<string, Buffer>();

function signingKey(secret: string, day: string, region: string, service: string): Buffer {
  const id = `${secret}\n${day}\n${region}\n${service}`;
  let k = keyCache.get(id);
  if (k === undefined) {
    k = hmac(hmac(hmac(hmac(`AWS4${secret}`, day), region), service), "aws4_request");
    if (keyCache.size > 64) keyCache.clear();
    keyCache.set(id, k);
  }
  return k;
}

export function signSigV4(req: SigV4Request, opts: SigV4Options): SigV4Result {
  const date = amzDate(opts.date);
  const day = date.slice(0, 8);
  const payloadHash = sha256Hex(req.body);
  const headers = new Map<string, string>();
  for (const [k, v] of Object.entries(req.headers ?? {})) headers.set(k.toLowerCase(), v.trim().replace(/\s+/g, " "));
  headers.set("host", req.host);
  headers.set("x-amz-date", date);
  const added: Record<string, string> = { "x-amz-date": date };
  if (opts.credentials.sessionToken !== undefined) {
    headers.set("x-amz-security-token", opts.credentials.sessionToken);
    added["x-amz-security-token"] = opts.credentials.sessionToken;
  }
  if (opts.contentSha256Header === true) {
    headers.set("x-amz-content-sha256", payloadHash);
    added["x-amz-content-sha256"] = payloadHash;
  }
  const names = [...headers.keys()].sort();
  const signedHeaders = names.join(";");
  const canonicalHeaders = names.map((n) => `${n}:${headers.get(n)}\n`).join("");
  const canonicalRequest = [
    req.method.toUpperCase(),
    canonicalPath(req.path),
    canonicalQuery(req.query ?? ""),
    canonicalHeaders,
    signedHeaders,
    payloadHash,
  ].join("\n");
  const scope = `${day}/${opts.region}/${opts.service}/aws4_request`;
  const stringToSign = ["AWS4-HMAC-SHA256", date, scope, sha256Hex(canonicalRequest)].join("\n");
  const key = signingKey(opts.credentials.secretAccessKey, day, opts.region, opts.service);
  const signature = createHmac("sha256", key).update(stringToSign).digest("hex");
  added["authorization"] =
    `AWS4-HMAC-SHA256 Credential=${opts.credentials.accessKeyId}/${scope}, SignedHeaders=${signedHeaders}, Signature=${signature}`;
  return { headers: added, canonicalRequest, stringToSign, signature };
}
