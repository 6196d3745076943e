// cloudC (Microsoft Entra ID) access tokens for `backend.auth.cloudC`, fetched the way Azure's identity libraries do:
// - a client secret (the Secret's clientID, tenantID, clientSecret): the OAuth 2.0 client credentials grant at
//   `<authority>/<tenant>/oauth2/v2.0/token`;
// - workload identity (AKS): the same grant with the projected service account token of AZURE_FEDERATED_TOKEN_FILE as
//   `client_assertion` (read again for every fetch: the kubelet rotates it), AZURE_CLIENT_ID and AZURE_TENANT_ID;
// - managed identity: IDENTITY_ENDPOINT with IDENTITY_HEADER (App Service, Container Apps), else the instance
//   metadata service `http://169.254.169.254/metadata/identity/oauth2/token` (host overridable with
//   AZURE_POD_IDENTITY_AUTHORITY_HOST) with `Metadata: true`, naming the identity by client, object or resource id;
// - none chosen: the environment decides, in that order of preference: workload identity, a client secret from
//   AZURE_CLIENT_ID / AZURE_TENANT_ID / AZURE_CLIENT_SECRET, then managed identity.
// The authority is AZURE_AUTHORITY_HOST, else https://login.microsoftonline.com. Errors carry the endpoint and the
// OAuth error code, never a secret or a token.

import { readFile } from "node:fs/promises";
import type { CloudCPlan } from "./plan.js";

const FETCH_TIMEOUT_MS = 4000;
const DEFAULT_AUTHORITY = "https://login.microsoftonline.com";
const IMDS = "http://169.254.169.254";
const ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

export interface CloudCToken {
  readonly value: string;
  readonly expiresAt: number;
}

export class CloudCTokenError extends Error {
  readonly code = "SLUICE_CLOUD_C_TOKEN";
}

type Env = Readonly<Record<string, string | undefined>>;
const set = (v: string | undefined): v is string => v !== undefined && v !== "";

/** Where a plan's token comes from, with the environment filled in. */
export type CloudCSource =
  | { readonly kind: "secret"; readonly tenant: string; readonly clientId: string; readonly secret: string }
  | { readonly kind: "workload"; readonly tenant: string; readonly clientId: string; readonly tokenFile: string }
  | {
      readonly kind: "managed";
      readonly id?: { readonly param: "client_id" | "object_id" | "msi_res_id"; readonly value: string };
    };

export function cloudCSource(plan: CloudCPlan, env: Env): CloudCSource | { error: string } {
  if (plan.secret !== undefined) return { kind: "secret", ...plan.secret };
  const fromEnvWorkload = () =>
    set(env.AZURE_FEDERATED_TOKEN_FILE) && set(env.AZURE_CLIENT_ID) && set(env.AZURE_TENANT_ID)
      ? {
          kind: "workload" as const,
          tenant: env.AZURE_TENANT_ID,
          clientId: env.AZURE_CLIENT_ID,
          tokenFile: env.AZURE_FEDERATED_TOKEN_FILE,
        }
      : undefined;
  if (plan.mode === "workloadIdentity") {
    return (
      fromEnvWorkload() ?? {
        error:
          "workloadIdentity needs AZURE_FEDERATED_TOKEN_FILE, AZURE_CLIENT_ID and AZURE_TENANT_ID in Sluice's environment",
      }
    );
  }
  if (plan.mode === "managedIdentity") {
    return { kind: "managed", ...(plan.managedIdentity !== undefined ? { id: plan.managedIdentity } : {}) };
  }
  const workload = fromEnvWorkload();
  if (workload !== undefined) return workload;
  if (set(env.AZURE_CLIENT_ID) && set(env.AZURE_TENANT_ID) && set(env.AZURE_CLIENT_SECRET)) {
    return {
      kind: "secret",
      tenant: env.AZURE_TENANT_ID,
      clientId: env.AZURE_CLIENT_ID,
      secret: env.AZURE_CLIENT_SECRET,
    };
  }
  return {
    kind: "managed",
    ...(set(env.AZURE_CLIENT_ID) ? { id: { param: "client_id" as const, value: env.AZURE_CLIENT_ID } } : {}),
  };
}

/** One token for `source` and `scope` (no cache here: the minter's TokenCache holds them). */
export async function fetchCloudCToken(
  source: CloudCSource,
  scope: string,
  env: Env,
  now: () => number,
): Promise<CloudCToken> {
  const authority = (set(env.AZURE_AUTHORITY_HOST) ? env.AZURE_AUTHORITY_HOST : DEFAULT_AUTHORITY).replace(/\/+$/, "");
  if (source.kind === "managed") return managed(source, scope, env, now);
  const form = new URLSearchParams({ grant_type: "client_credentials", client_id: source.clientId, scope });
  if (source.kind === "secret") form.set("client_secret", source.secret);
  else {
    let assertion: string;
    try {
      assertion = (await readFile(source.tokenFile, "utf8")).trim();
    } catch (e) {
      throw new CloudCTokenError(`AZURE_FEDERATED_TOKEN_FILE: ${(e as NodeJS.ErrnoException).code ?? "unreadable"}`);
    }
    form.set("client_assertion_type", ASSERTION_TYPE);
    form.set("client_assertion", assertion);
  }
  const url = `${authority}/${encodeURIComponent(source.tenant)}/oauth2/v2.0/token`;
  const body = await call(url, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: form.toString(),
  });
  return token(body, url, now);
}

async function managed(
  source: Extract<CloudCSource, { kind: "managed" }>,
  scope: string,
  env: Env,
  now: () => number,
): Promise<CloudCToken> {
  // Managed identity speaks the v1 protocol: a resource, not a scope.
  const resource = scope.replace(/\/\.default$/, "");
  let url: URL;
  const headers: Record<string, string> = {};
  if (set(env.IDENTITY_ENDPOINT) && set(env.IDENTITY_HEADER)) {
    url = new URL(env.IDENTITY_ENDPOINT);
    url.searchParams.set("api-version", "2019-08-01");
    headers["x-identity-header"] = env.IDENTITY_HEADER;
  } else {
    const host = set(env.AZURE_POD_IDENTITY_AUTHORITY_HOST) ? env.AZURE_POD_IDENTITY_AUTHORITY_HOST : IMDS;
    url = new URL(`${host.replace(/\/+$/, "")}/metadata/identity/oauth2/token`);
    url.searchParams.set("api-version", "2018-02-01");
    headers.metadata = "true";
  }
  url.searchParams.set("resource", resource);
  if (source.id !== undefined) {
    // App Service names a resource id `mi_res_id`; the instance metadata service `msi_res_id`.
    const param = source.id.param === "msi_res_id" && set(env.IDENTITY_ENDPOINT) ? "mi_res_id" : source.id.param;
    url.searchParams.set(param, source.id.value);
  }
  const endpoint = `${url.origin}${url.pathname}`;
  return token(await call(url.toString(), { headers }, endpoint), endpoint, now);
}

async function call(url: string, init: RequestInit, name = url): Promise<Record<string, unknown>> {
  let res: Response;
  try {
    res = await fetch(url, { ...init, signal: AbortSignal.timeout(FETCH_TIMEOUT_MS) });
  } catch (e) {
    throw new CloudCTokenError(`${name}: ${(e as Error).name === "TimeoutError" ? "timed out" : "unreachable"}`);
  }
  const text = await res.text();
  let json: Record<string, unknown> = {};
  try {
    const v: unknown = JSON.parse(text);
    if (typeof v === "object" && v !== null && !Array.isArray(v)) json = v as Record<string, unknown>;
  } catch {
    // reported below
  }
  if (!res.ok) {
    const code = typeof json.error === "string" ? json.error : typeof json.error === "object" ? "error" : "";
    throw new CloudCTokenError(`${name} answered ${res.status}${code !== "" ? ` (${code})` : ""}`);
  }
  return json;
}

function token(body: Record<string, unknown>, from: string, now: () => number): CloudCToken {
  const value = body.access_token;
  if (typeof value !== "string" || value === "") throw new CloudCTokenError(`${from} answered without an access_token`);
  // Entra answers a number; managed identity endpoints a string of seconds.
  const expiresIn = Number(body.expires_in);
  return { value, expiresAt: now() + (Number.isFinite(expiresIn) && expiresIn > 0 ? expiresIn : 3600) * 1000 };
}
