// Basic authentication against htpasswd-style `<user>:<hash>` lines.
//
// Supported hashes: Apache MD5 `$apr1$` (and MD5-crypt `$1$`), bcrypt `$2a$`/`$2b$`/`$2y$`, traditional DES crypt
// (13 characters) and SHA-1 `{SHA}`. Raw passwords are refused, as the spec requires hashes.
//
// Computed hashes are compared with crypto.timingSafeEqual. bcrypt is deliberately slow (tens of ms per check), so a
// successful verification is remembered in a small bounded set keyed by the SHA-256 of the credentials and the stored
// hash; the set belongs to the compiled policy and is dropped with it.

import { createHash, timingSafeEqual } from "node:crypto";
import aprMd5Module from "apache-md5";
import bcrypt from "bcryptjs";
import unixCryptTD from "unix-crypt-td-js";
import type { CelActivation } from "../cel/index.js";
import type { Problem } from "./authorization.js";
import { type CompiledLocation, compileLocation, type ExtractionLocation, extractCredential } from "./credentials.js";
import { LruCache } from "./lru.js";

// apache-md5 is CommonJS (`module.exports = fn`) while its typings declare an ES default export; under nodenext the
// default import is module.exports, i.e. the function itself.
const aprMd5 = aprMd5Module as unknown as (password: string, salt: string) => string;

export type BasicAuthMode = "Strict" | "Optional";
export type HashKind = "apr1" | "md5crypt" | "bcrypt" | "crypt" | "sha1";

export interface HtpasswdUser {
  readonly username: string;
  readonly kind: HashKind;
  readonly hash: string;
}

const BCRYPT_RE = /^\$2[aby]\$\d\d\$[./A-Za-z0-9]{53}$/;
const MD5_RE = /^\$(apr1|1)\$[^$]{0,8}\$[./A-Za-z0-9]{22}$/;
const CRYPT_RE = /^[./A-Za-z0-9]{13}$/;
const SHA_RE = /^\{SHA\}[A-Za-z0-9+/]{27}=$/;

export function hashKind(hash: string): HashKind | undefined {
  if (BCRYPT_RE.test(hash)) return "bcrypt";
  const md5 = MD5_RE.exec(hash);
  if (md5) return md5[1] === "apr1" ? "apr1" : "md5crypt";
  if (SHA_RE.test(hash)) return "sha1";
  if (CRYPT_RE.test(hash)) return "crypt";
  return undefined;
}

/** Parses htpasswd lines (blank lines and `#` comments skipped); every bad line is reported, never echoing the hash. */
export function parseHtpasswd(
  lines: readonly string[],
  pathOf: (index: number) => string,
): { readonly users: ReadonlyMap<string, HtpasswdUser>; readonly problems: readonly Problem[] } {
  const users = new Map<string, HtpasswdUser>();
  const problems: Problem[] = [];
  lines.forEach((rawLine, i) => {
    const line = rawLine.trim();
    if (line === "" || line.startsWith("#")) return;
    const colon = line.indexOf(":");
    if (colon <= 0) {
      problems.push({ path: pathOf(i), message: 'expected "<user>:<password hash>"' });
      return;
    }
    const username = line.slice(0, colon);
    const hash = line.slice(colon + 1);
    const kind = hashKind(hash);
    if (kind === undefined) {
      problems.push({
        path: pathOf(i),
        message: `user "${username}": unsupported or malformed hash; use MD5 ($apr1$), bcrypt ($2y$), crypt or SHA-1 ({SHA}), never a raw password`,
      });
      return;
    }
    if (users.has(username)) {
      // Apache uses the first line for a user; keep that and say the others are ignored.
      problems.push({ path: pathOf(i), message: `user "${username}" is defined more than once; this line is ignored` });
      return;
    }
    users.set(username, { username, kind, hash });
  });
  return { users, problems };
}

/** Password check for one user; constant-time comparison of the computed and stored hash. */
export async function verifyPassword(user: HtpasswdUser, password: string): Promise<boolean> {
  switch (user.kind) {
    case "bcrypt":
      // bcryptjs compares in constant time; $2y$ is the same algorithm as $2b$ (PHP/Apache naming).
      return bcrypt.compare(password, user.hash.startsWith("$2y$") ? `$2b$${user.hash.slice(4)}` : user.hash);
    case "apr1":
    case "md5crypt":
      return safeEqual(aprMd5(bytesAsLatin1(password), user.hash), user.hash);
    case "crypt":
      return safeEqual(unixCryptTD(bytesAsLatin1(password), user.hash.slice(0, 2)), user.hash);
    case "sha1":
      return safeEqual(`{SHA}${createHash("sha1").update(password, "utf8").digest("base64")}`, user.hash);
  }
}

/**
 * The JS MD5/crypt implementations work on strings of byte-sized characters; htpasswd hashes the UTF-8 bytes, so
 * a non-ASCII password is handed over as its UTF-8 bytes, one character per byte.
 */
function bytesAsLatin1(s: string): string {
  return Buffer.from(s, "utf8").toString("latin1");
}

function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a, "utf8");
  const y = Buffer.from(b, "utf8");
  // timingSafeEqual needs equal lengths; compare y with itself so both branches do the same work.
  return x.length === y.length ? timingSafeEqual(x, y) : !timingSafeEqual(y, y);
}

export interface BasicAuthSpec {
  readonly users?: readonly string[];
  /** The complete `.htaccess` file content, already read from the Secret by the translator. */
  readonly htpasswd?: string;
  readonly mode?: BasicAuthMode;
  readonly realm?: string;
  readonly location?: ExtractionLocation;
}

export interface BasicAuth {
  readonly mode: BasicAuthMode;
  readonly realm: string;
  readonly wwwAuthenticate: string;
  readonly location: CompiledLocation;
  readonly users: ReadonlyMap<string, HtpasswdUser>;
  /** Digests of credentials already verified (positive results only). */
  readonly verified: LruCache<string, true>;
}

export function compileBasicAuth(
  spec: BasicAuthSpec,
  path: string,
): { readonly auth?: BasicAuth; readonly problems: readonly Problem[] } {
  const problems: Problem[] = [];
  if ((spec.users === undefined) === (spec.htpasswd === undefined)) {
    problems.push({ path, message: "exactly one of users and secretRef is required" });
  }
  const mode = spec.mode ?? "Strict";
  if (mode !== "Strict" && mode !== "Optional") {
    problems.push({ path: `${path}.mode`, message: `unknown mode "${String(mode)}"; Strict or Optional` });
  }
  const lines = spec.users ?? (spec.htpasswd ?? "").split(/\r?\n/);
  const parsed = parseHtpasswd(lines, (i) =>
    spec.users !== undefined ? `${path}.users[${i}]` : `${path}.secretRef (line ${i + 1})`,
  );
  problems.push(...parsed.problems);
  const loc = compileLocation(spec.location, "Basic", `${path}.location`);
  problems.push(...loc.problems);
  if (loc.location === undefined || problems.length > 0) return { problems };
  const realm = spec.realm ?? "Restricted";
  return {
    auth: {
      mode,
      realm,
      wwwAuthenticate: `Basic realm="${realm.replace(/["\\]/g, "\\$&")}"`,
      location: loc.location,
      users: parsed.users,
      verified: new LruCache(1024),
    },
    problems,
  };
}

export type BasicAuthResult =
  | { readonly outcome: "authenticated"; readonly username: string }
  | { readonly outcome: "anonymous" }
  | {
      readonly outcome: "denied";
      readonly reason: "missing" | "malformed" | "invalid";
      readonly wwwAuthenticate: string;
    };

/** Strict: valid credentials required. Optional: absent credentials pass, wrong ones do not. */
export async function checkBasicAuth(auth: BasicAuth, activation: CelActivation): Promise<BasicAuthResult> {
  const credential = extractCredential(auth.location, activation);
  if (credential === undefined) {
    return auth.mode === "Strict"
      ? { outcome: "denied", reason: "missing", wwwAuthenticate: auth.wwwAuthenticate }
      : { outcome: "anonymous" };
  }
  const decoded = decodeBasic(credential);
  if (decoded === undefined) return { outcome: "denied", reason: "malformed", wwwAuthenticate: auth.wwwAuthenticate };
  const user = auth.users.get(decoded.username);
  if (user !== undefined) {
    const key = createHash("sha256").update(`${user.hash}\0${decoded.username}\0${decoded.password}`).digest("base64");
    if (auth.verified.get(key) === true || (await verifyPassword(user, decoded.password))) {
      auth.verified.set(key, true);
      return { outcome: "authenticated", username: user.username };
    }
  }
  return { outcome: "denied", reason: "invalid", wwwAuthenticate: auth.wwwAuthenticate };
}

function decodeBasic(credential: string): { username: string; password: string } | undefined {
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(credential)) return undefined;
  const text = Buffer.from(credential, "base64").toString("utf8");
  const colon = text.indexOf(":");
  if (colon < 0) return undefined;
  return { username: text.slice(0, colon), password: text.slice(colon + 1) };
}
