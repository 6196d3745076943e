// The controller's side of authenticated xDS (docs/xds-security.md): Sluice's CA lives in a Secret of the
// controller's namespace, shared by every replica; each Gateway of Sluice gets its Envoys' client certificate in a
// Secret of its own namespace (type kubernetes.io/tls: tls.crt, tls.key, ca.crt), which its Envoy pods mount.
//
// - Any replica creates the CA Secret when there is none (the first create wins; the others read it), since every
//   replica serves xDS and needs it before serving.
// - Only the Lease holder writes Gateway Secrets: one per Gateway, re-issued when missing, not of this CA, naming
//   another Gateway, or past two thirds of its lifetime. The Secret is owned by its Gateway (deleted with it).

import { createHash } from "node:crypto";
import { GATEWAY_NAME_LABEL } from "../../api/gateway-api.js";
import {
  type CertificateAuthority,
  checkGatewayCertificate,
  createCa,
  issueGatewayCertificate,
} from "../../security/certificates.js";
import { isKubeError, type KubeClient, type KubeObject, resourcePath } from "./client.js";

export const CA_SECRET = "sluice-xds-ca";
const SECRETS = { group: "", version: "v1", plural: "secrets" } as const;
/** app.kubernetes.io/managed-by of what the controller creates (a label value: no slash). */
const MANAGED_BY = "sluice";

/** The Secret holding Gateway `name`'s client certificate, in the Gateway's namespace (at most 253 characters). */
export function gatewaySecretName(gatewayName: string): string {
  const name = `sluice-xds-${gatewayName}`;
  if (name.length <= 253) return name;
  const hash = createHash("sha256").update(gatewayName).digest("hex").slice(0, 10);
  return `${name.slice(0, 242)}-${hash}`;
}

function decode(data: unknown, key: string): string | undefined {
  const v = (data as Record<string, unknown> | undefined)?.[key];
  return typeof v === "string" ? Buffer.from(v, "base64").toString("utf8") : undefined;
}

function encode(values: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(values).map(([k, v]) => [k, Buffer.from(v).toString("base64")]));
}

/** The CA Secret of `namespace`, created (with a new CA) when there is none. */
export async function loadOrCreateCaSecret(
  client: KubeClient,
  namespace: string,
  log: (line: string) => void,
): Promise<CertificateAuthority> {
  const path = resourcePath(SECRETS, namespace, CA_SECRET);
  for (let attempt = 0; attempt < 5; attempt++) {
    try {
      const secret = await client.get<KubeObject>(path);
      const cert = decode(secret["data"], "ca.crt");
      const key = decode(secret["data"], "ca.key");
      if (cert === undefined || key === undefined)
        throw new Error(`Secret ${namespace}/${CA_SECRET} lacks ca.crt or ca.key; delete it to have a new CA made`);
      return { cert, key };
    } catch (e) {
      if (!isKubeError(e, 404)) throw e;
    }
    const ca = await createCa();
    try {
      await client.request("POST", resourcePath(SECRETS, namespace), {
        body: {
          apiVersion: "v1",
          kind: "Secret",
          metadata: { name: CA_SECRET, namespace, labels: { "app.kubernetes.io/managed-by": MANAGED_BY } },
          type: "Opaque",
          data: encode({ "ca.crt": ca.cert, "ca.key": ca.key }),
        },
      });
      log(`kube: created Sluice's xDS CA in Secret ${namespace}/${CA_SECRET}`);
      return ca;
    } catch (e) {
      // Another replica created it first: read theirs.
      if (!isKubeError(e, 409)) throw e;
    }
  }
  throw new Error(`Secret ${namespace}/${CA_SECRET}: could neither read nor create it`);
}

export interface GatewayRef {
  readonly namespace: string;
  readonly name: string;
  readonly uid?: string;
}

/** Keeps each Gateway's client certificate Secret valid (the Lease holder runs it after each translation). */
export class GatewayCertificates {
  readonly #client: KubeClient;
  readonly #ca: CertificateAuthority;
  readonly #log: (line: string) => void;
  #running: Promise<void> | undefined;
  #again: readonly GatewayRef[] | undefined;
  /** Secrets checked and found good, by Gateway and the Secret's resourceVersion: not checked again. */
  readonly #good = new Map<string, string>();
  issued = 0;

  constructor(client: KubeClient, ca: CertificateAuthority, log: (line: string) => void) {
    this.#client = client;
    this.#ca = ca;
    this.#log = log;
  }

  /**
   * Makes sure every Gateway of `gateways` has a good Secret; `current` gives the Secret as the watch last saw it.
   * Runs one pass at a time (a call during a pass makes one more pass, with the latest Gateways).
   */
  reconcile(
    gateways: readonly GatewayRef[],
    current: (namespace: string, name: string) => KubeObject | undefined,
  ): void {
    if (this.#running !== undefined) {
      this.#again = gateways;
      return;
    }
    this.#running = (async () => {
      // A pass over no Gateway awaits nothing: without this it would clear #running before it is set, and every
      // later call would wait for a pass that never comes.
      await Promise.resolve();
      let next: readonly GatewayRef[] | undefined = gateways;
      while (next !== undefined) {
        this.#again = undefined;
        for (const g of next) {
          try {
            await this.#ensure(g, current(g.namespace, gatewaySecretName(g.name)));
          } catch (e) {
            this.#log(`kube: xDS certificate of Gateway ${g.namespace}/${g.name}: ${(e as Error).message}`);
          }
        }
        next = this.#again;
      }
      this.#running = undefined;
    })();
  }

  /** Resolves when no pass is running (tests). */
  async idle(): Promise<void> {
    while (this.#running !== undefined) await this.#running;
  }

  async #ensure(g: GatewayRef, secret: KubeObject | undefined): Promise<void> {
    const key = `${g.namespace}/${g.name}`;
    const rv = secret?.metadata.resourceVersion;
    if (rv !== undefined && this.#good.get(key) === rv) return;
    let why = "it has none";
    if (secret !== undefined) {
      const cert = decode(secret["data"], "tls.crt");
      const ca = decode(secret["data"], "ca.crt");
      const check =
        cert !== undefined ? await checkGatewayCertificate(this.#ca.cert, cert, { gateway: key }) : undefined;
      if (check?.ok === true && !check.renewalDue && ca === this.#ca.cert) {
        if (rv !== undefined) this.#good.set(key, rv);
        return;
      }
      why =
        check === undefined
          ? "its Secret has no tls.crt"
          : check.ok
            ? ca !== this.#ca.cert
              ? "its Secret's ca.crt is not the current CA"
              : "two thirds of its lifetime have passed"
            : check.message;
    }
    const issued = await issueGatewayCertificate(this.#ca, key);
    const name = gatewaySecretName(g.name);
    const body = {
      apiVersion: "v1",
      kind: "Secret",
      metadata: {
        name,
        namespace: g.namespace,
        labels: { "app.kubernetes.io/managed-by": MANAGED_BY, [GATEWAY_NAME_LABEL]: g.name },
        ...(g.uid !== undefined
          ? {
              ownerReferences: [
                {
                  apiVersion: "gateway.networking.k8s.io/v1",
                  kind: "Gateway",
                  name: g.name,
                  uid: g.uid,
                  controller: true,
                },
              ],
            }
          : {}),
        ...(secret?.metadata.resourceVersion !== undefined ? { resourceVersion: secret.metadata.resourceVersion } : {}),
      },
      type: "kubernetes.io/tls",
      data: encode({ "tls.crt": issued.cert, "tls.key": issued.key, "ca.crt": issued.ca }),
    };
    try {
      if (secret === undefined) await this.#client.request("POST", resourcePath(SECRETS, g.namespace), { body });
      else await this.#client.request("PUT", resourcePath(SECRETS, g.namespace, name), { body });
    } catch (e) {
      // The watch had not shown the Secret yet (409 on create), or it changed since: the watch event that follows
      // brings another pass, which sees it.
      if (isKubeError(e, 409)) return;
      throw e;
    }
    this.issued++;
    this.#good.delete(key);
    this.#log(`kube: issued Gateway ${key}'s xDS client certificate into Secret ${g.namespace}/${name} (${why})`);
  }
}
