// A JWT issuer for end-to-end tests: an RS256 key pair, its key set as the inline `jwks` text a GwPolicy's
// jwtAuthentication takes, and tokens carrying the `kid` and `exp` the spec requires of tokens used with the gateway.

import { exportJWK, generateKeyPair, type JWTPayload, SignJWT } from "jose";

export interface TestIssuer {
  /** `{"keys":[...]}`: the public key, `kid` and `alg` set. */
  readonly jwks: string;
  /** A token with these claims, signed with the key, issued by the issuer, valid for an hour. */
  sign(claims: JWTPayload): Promise<string>;
}

export async function testIssuer(issuer: string, kid = "k1"): Promise<TestIssuer> {
  const { publicKey, privateKey } = await generateKeyPair("RS256");
  const jwk = { ...(await exportJWK(publicKey)), kid, alg: "RS256", use: "sig" };
  return {
    jwks: JSON.stringify({ keys: [jwk] }),
    sign: (claims) =>
      new SignJWT(claims)
        .setProtectedHeader({ alg: "RS256", kid })
        .setIssuer(issuer)
        .setExpirationTime("1h")
        .sign(privateKey),
  };
}
