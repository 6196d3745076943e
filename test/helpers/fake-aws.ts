// A local stand-in for AWS STS and for the container credentials endpoint, speaking their real wire formats:
// - STS's Query API (POST form `Action=AssumeRole&Version=2011-06-15&RoleArn=...&RoleSessionName=...&Tags.member.N.Key
//   /Value`), whose SigV4 signature is verified with the base credentials the fake knows, answered with the
//   `AssumeRoleResponse` XML (or STS's `ErrorResponse` XML); `AssumeRoleWithWebIdentity` (unsigned, the web identity
//   token in the form) too;
// - the ECS / EKS Pod Identity endpoint (`AWS_CONTAINER_CREDENTIALS_FULL_URI`): GET with the authorization token,
//   JSON `{AccessKeyId, SecretAccessKey, Token, Expiration}`.
// Every key it issues is remembered, so a fake provider can verify that a request was signed with it.

import { randomBytes } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { AwsCredentials } from "../../src/llm/codec/sigv4.js";
import { verifySigV4 } from "./sigv4-verify.js";

export interface AssumeRoleCall {
  readonly action: "AssumeRole" | "AssumeRoleWithWebIdentity";
  /** The access key that signed the call (AssumeRole). */
  readonly signedWith?: string;
  readonly roleArn: string;
  readonly sessionName: string;
  readonly tags: readonly { key: string; value: string }[];
  readonly webIdentityToken?: string;
}

export interface IssuedCredentials extends AwsCredentials {
  readonly sessionToken: string;
  /** Where they came from: `role:<arn>:<session>`, `container`. */
  readonly origin: string;
}

export interface FakeAws {
  readonly port: number;
  /** STS endpoint URL (AWS_ENDPOINT_URL_STS). */
  readonly stsUrl: string;
  /** Container credentials URL (AWS_CONTAINER_CREDENTIALS_FULL_URI). */
  readonly containerUrl: string;
  readonly containerToken: string;
  readonly calls: AssumeRoleCall[];
  /** Container credentials requests served. */
  containerRequests: number;
  /** Lifetime of issued credentials, seconds (default 3600). */
  lifetimeSeconds: number;
  /** Base credentials STS accepts (long-term keys, or temporary ones with their token). */
  trust(c: AwsCredentials): void;
  /** Roles whose AssumeRole STS refuses (AccessDenied). */
  readonly denied: Set<string>;
  /** Delay before STS answers, ms. */
  delayMs: number;
  /** Credentials of a key this fake knows (trusted or issued). */
  lookup(accessKeyId: string): AwsCredentials | undefined;
  issued(accessKeyId: string): IssuedCredentials | undefined;
  close(): Promise<void>;
}

const NS = "https://sts.amazonaws.com/doc/2011-06-15/";

export async function startFakeAws(region: string): Promise<FakeAws> {
  const known = new Map<string, AwsCredentials>();
  const issued = new Map<string, IssuedCredentials>();
  const containerToken = `pod-identity-${randomBytes(8).toString("hex")}`;
  let n = 0;
  const issue = (origin: string): IssuedCredentials => {
    n++;
    const c: IssuedCredentials = {
      accessKeyId: `ASIAFAKE${String(n).padStart(12, "0")}`,
      secretAccessKey: randomBytes(30).toString("base64"),
      sessionToken: `IQoJb3JpZ2luX2VjE${randomBytes(24).toString("base64")}`,
      origin,
    };
    issued.set(c.accessKeyId, c);
    known.set(c.accessKeyId, c);
    return c;
  };
  const expiration = () => new Date(Date.now() + fake.lifetimeSeconds * 1000).toISOString().replace(/\.\d{3}/, "");

  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      const xml = (status: number, text: string) => {
        res.writeHead(status, { "content-type": "text/xml", "x-amzn-requestid": `req-${n}` });
        res.end(text);
      };
      const stsError = (status: number, type: string, code: string, message: string) =>
        xml(
          status,
          `<ErrorResponse xmlns="${NS}"><Error><Type>${type}</Type><Code>${code}</Code><Message>${esc(message)}</Message></Error><RequestId>req-${n}</RequestId></ErrorResponse>`,
        );
      const url = new URL(req.url ?? "/", "http://x");
      if (req.method === "GET" && url.pathname === "/container-credentials") {
        if (req.headers.authorization !== containerToken) {
          res.writeHead(401, { "content-type": "application/json" });
          res.end(JSON.stringify({ code: "AccessDenied", message: "invalid authorization token" }));
          return;
        }
        fake.containerRequests++;
        const c = issue("container");
        res.writeHead(200, { "content-type": "application/json" });
        res.end(
          JSON.stringify({
            AccessKeyId: c.accessKeyId,
            SecretAccessKey: c.secretAccessKey,
            Token: c.sessionToken,
            AccountId: "123456789012",
            Expiration: expiration(),
          }),
        );
        return;
      }
      if (req.method !== "POST" || url.pathname !== "/") return stsError(404, "Sender", "NotFound", "not found");
      const form = new URLSearchParams(body);
      const action = form.get("Action");
      if (form.get("Version") !== "2011-06-15") return stsError(400, "Sender", "InvalidAction", "unknown version");
      let signedWith: string | undefined;
      if (action === "AssumeRole") {
        const check = verifySigV4(
          { method: req.method, path: req.url ?? "/", headers: req.headers, body },
          { region, service: "sts" },
          (id) => known.get(id),
        );
        if ("error" in check) {
          return stsError(403, "Sender", "SignatureDoesNotMatch", `The request signature is invalid: ${check.error}`);
        }
        signedWith = check.ok.accessKeyId;
      } else if (action !== "AssumeRoleWithWebIdentity") {
        return stsError(400, "Sender", "InvalidAction", `Could not find operation ${String(action)}`);
      }
      const tags: { key: string; value: string }[] = [];
      for (let i = 1; form.has(`Tags.member.${i}.Key`); i++) {
        tags.push({ key: form.get(`Tags.member.${i}.Key`) ?? "", value: form.get(`Tags.member.${i}.Value`) ?? "" });
      }
      const roleArn = form.get("RoleArn") ?? "";
      const sessionName = form.get("RoleSessionName") ?? "";
      const token = form.get("WebIdentityToken") ?? undefined;
      fake.calls.push({
        action,
        ...(signedWith !== undefined ? { signedWith } : {}),
        roleArn,
        sessionName,
        tags,
        ...(token !== undefined ? { webIdentityToken: token } : {}),
      });
      if (!/^[\w+=,.@-]{2,64}$/.test(sessionName)) {
        return stsError(400, "Sender", "ValidationError", "1 validation error detected: roleSessionName");
      }
      if (fake.denied.has(roleArn)) {
        return stsError(
          403,
          "Sender",
          "AccessDenied",
          `User: arn:aws:iam::123456789012:user/sluice is not authorized to perform: sts:AssumeRole on resource: ${roleArn}`,
        );
      }
      const c = issue(`role:${roleArn}:${sessionName}`);
      const role = roleArn.split("/").pop() ?? "role";
      setTimeout(
        () =>
          xml(
            200,
            `<${action}Response xmlns="${NS}"><${action}Result><AssumedRoleUser><Arn>arn:aws:sts::123456789012:assumed-role/${esc(role)}/${esc(sessionName)}</Arn><AssumedRoleId>AROAFAKE:${esc(sessionName)}</AssumedRoleId></AssumedRoleUser><Credentials><AccessKeyId>${c.accessKeyId}</AccessKeyId><SecretAccessKey>${esc(c.secretAccessKey)}</SecretAccessKey><SessionToken>${esc(c.sessionToken)}</SessionToken><Expiration>${expiration()}</Expiration></Credentials><PackedPolicySize>${tags.length}</PackedPolicySize></${action}Result><ResponseMetadata><RequestId>req-${n}</RequestId></ResponseMetadata></${action}Response>`,
          ),
        fake.delayMs,
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  const fake: FakeAws = {
    port,
    stsUrl: `http://127.0.0.1:${port}`,
    containerUrl: `http://127.0.0.1:${port}/container-credentials`,
    containerToken,
    calls: [],
    containerRequests: 0,
    lifetimeSeconds: 3600,
    denied: new Set(),
    delayMs: 0,
    trust: (c) => known.set(c.accessKeyId, c),
    lookup: (id) => known.get(id),
    issued: (id) => issued.get(id),
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  return fake;
}

function esc(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}

/**
 * The environment of a Sluice whose AWS SDK finds credentials at `aws` alone (its container credentials endpoint, its
 * STS), never the host's: the instance metadata service off, the config and credentials files at `missingFile` (a
 * path that does not exist), every other source emptied.
 */
export function fakeAwsEnv(aws: FakeAws, missingFile: string): Record<string, string> {
  return {
    AWS_CONTAINER_CREDENTIALS_FULL_URI: aws.containerUrl,
    AWS_CONTAINER_AUTHORIZATION_TOKEN: aws.containerToken,
    AWS_ENDPOINT_URL_STS: aws.stsUrl,
    AWS_EC2_METADATA_DISABLED: "true",
    AWS_CONFIG_FILE: missingFile,
    AWS_SHARED_CREDENTIALS_FILE: missingFile,
    AWS_ACCESS_KEY_ID: "",
    AWS_SECRET_ACCESS_KEY: "",
    AWS_SESSION_TOKEN: "",
    AWS_PROFILE: "",
    AWS_WEB_IDENTITY_TOKEN_FILE: "",
    AWS_CONTAINER_CREDENTIALS_RELATIVE_URI: "",
  };
}
