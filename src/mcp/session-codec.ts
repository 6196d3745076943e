// The `mcp-session-id` Sluice issues: the session's state (its Gateway and backend, the targets' own session ids and
// the protocol versions agreed), sealed with AES-256-GCM. Any Sluice replica holding the same key can open it and
// resume the session; without the key it can be neither read nor forged, and a session of another Gateway or backend
// is refused (both are in the sealed state and compared with the route the request came through).

import { createCipheriv, createDecipheriv, createHash, randomBytes } from "node:crypto";

/** The target sessions of one Sluice session. */
export interface TargetSessionState {
  /** Target name. */
  readonly n: string;
  /** The URL the session was started on (a Service's endpoints are several; a session stays on one). */
  readonly u: string;
  /** The target's `mcp-session-id`; absent for a target that issues none (or an SSE target). */
  readonly s?: string;
  /** Protocol version agreed with the target. */
  readonly v?: string;
}

export interface SessionState {
  /** Format version. */
  readonly fmt: 1;
  /** The MCP route's key (names.ts mcpClusterName): Gateway and GwBackend. */
  readonly route: string;
  /** Protocol version agreed with the client. */
  readonly pv: string;
  readonly targets: readonly TargetSessionState[];
  /** Targets skipped at initialize (FailOpen), by name. */
  readonly skipped?: readonly string[];
  /** The client's capabilities and info, to start a target's session again (SSE targets on another replica). */
  readonly caps?: unknown;
  readonly info?: unknown;
  /** Issued at (ms since epoch). */
  readonly iat: number;
}

const IV_BYTES = 12;
const TAG_BYTES = 16;
/** Bound to the format, so a token of another use of the same key is never taken for a session. */
const AAD = Buffer.from("sluice-mcp-session/v1", "utf8");
/** A token longer than this is refused before any decryption (headers carry it; real ones are far shorter). */
export const MAX_TOKEN_CHARS = 16 * 1024;

export type OpenResult =
  | { readonly ok: true; readonly state: SessionState }
  | { readonly ok: false; readonly reason: "malformed" | "forged" | "other-route" };

export class SessionCodec {
  readonly #key: Buffer;

  /** `key`: 32 bytes. */
  constructor(key: Buffer) {
    if (key.byteLength !== 32) throw new Error("the session key must be 32 bytes");
    this.#key = key;
  }

  /**
   * From `SESSION_KEY`: 64 hex digits or 44 base64 characters are the key's bytes; any other text is hashed (SHA-256)
   * into one. Absent: a random key for this process, and `warn` says that sessions will not survive it.
   */
  static fromEnv(value: string | undefined, warn: (line: string) => void): SessionCodec {
    if (value === undefined || value === "") {
      warn(
        "sluice: SESSION_KEY is not set; MCP sessions are sealed with a key of this process only, so another replica or a restart cannot resume them",
      );
      return new SessionCodec(randomBytes(32));
    }
    if (/^[0-9a-fA-F]{64}$/.test(value)) return new SessionCodec(Buffer.from(value, "hex"));
    const b64 = Buffer.from(value, "base64");
    if (b64.byteLength === 32 && /^[A-Za-z0-9+/_-]{43}=?$/.test(value)) return new SessionCodec(b64);
    return new SessionCodec(createHash("sha256").update(value, "utf8").digest());
  }

  seal(state: SessionState): string {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv("aes-256-gcm", this.#key, iv);
    cipher.setAAD(AAD);
    const body = Buffer.concat([cipher.update(JSON.stringify(state), "utf8"), cipher.final()]);
    return Buffer.concat([iv, body, cipher.getAuthTag()]).toString("base64url");
  }

  /** Opens `token` for a request that came through route `route`. */
  open(token: string, route: string): OpenResult {
    if (token.length > MAX_TOKEN_CHARS || !/^[A-Za-z0-9_-]+$/.test(token)) return { ok: false, reason: "malformed" };
    const raw = Buffer.from(token, "base64url");
    if (raw.byteLength < IV_BYTES + TAG_BYTES + 2) return { ok: false, reason: "malformed" };
    const iv = raw.subarray(0, IV_BYTES);
    const tag = raw.subarray(raw.byteLength - TAG_BYTES);
    const body = raw.subarray(IV_BYTES, raw.byteLength - TAG_BYTES);
    let text: string;
    try {
      const decipher = createDecipheriv("aes-256-gcm", this.#key, iv);
      decipher.setAAD(AAD);
      decipher.setAuthTag(tag);
      text = Buffer.concat([decipher.update(body), decipher.final()]).toString("utf8");
    } catch {
      // The tag does not verify: altered, or sealed with another key.
      return { ok: false, reason: "forged" };
    }
    let state: SessionState;
    try {
      state = JSON.parse(text) as SessionState;
    } catch {
      return { ok: false, reason: "malformed" };
    }
    if (state.fmt !== 1 || !Array.isArray(state.targets)) return { ok: false, reason: "malformed" };
    if (state.route !== route) return { ok: false, reason: "other-route" };
    return { ok: true, state };
  }
}
