// Loading a file set and translating it: shared by translate, status, serve and run.

import { FileSource, type LoadResult } from "../sources/file-source.js";
import type { KubeSource } from "../sources/kube/kube-source.js";
import { agentCoreEndpointFromEnv } from "../translate/backend/agent-core.js";
import { makeInput } from "../translate/input.js";
import { type TranslateOptions, type TranslationResult, translate } from "../translate/translate.js";

export interface Loaded {
  readonly load: LoadResult;
  readonly result: TranslationResult;
}

/**
 * Translates a load; file mode (the default) implies a GatewayClass `sluice` when none is defined. The agent runtime
 * endpoint override comes from this process's environment, as the AWS SDKs read it.
 */
export function translateLoad(load: LoadResult, opts: TranslateOptions = {}): TranslationResult {
  const agentCoreEndpoint = opts.agentCoreEndpoint ?? agentCoreEndpointFromEnv(process.env);
  return translate(
    makeInput(load.resources, () => load.sources, load.invalid),
    {
      ...opts,
      impliedGatewayClass: opts.impliedGatewayClass ?? true,
      ...(agentCoreEndpoint !== undefined ? { agentCoreEndpoint } : {}),
    },
  );
}

export async function loadAndTranslate(paths: readonly string[]): Promise<Loaded> {
  const load = await new FileSource(paths).load();
  return { load, result: translateLoad(load) };
}

/**
 * One consistent view of a cluster (every watched kind listed once), for the one-shot commands (validate, explain,
 * status). Kinds the API server does not serve count as empty. `onSource` sees the source before it is closed.
 */
export async function loadCluster(
  kubeconfig: string,
  log: (line: string) => void,
  onSource?: (source: KubeSource) => void,
): Promise<LoadResult> {
  // The Kubernetes client is loaded only when a cluster is read (some 870 files; file mode never needs it).
  const [{ KubeClient }, { KubeSource }] = await Promise.all([
    import("../sources/kube/client.js"),
    import("../sources/kube/kube-source.js"),
  ]);
  const client = await KubeClient.load(kubeconfig === "" ? undefined : kubeconfig);
  const source = new KubeSource(client, { log });
  try {
    source.start();
    const deadline = Date.now() + 60_000;
    while (!source.synced) {
      if (Date.now() > deadline) throw new Error(`the API server did not list ${source.unsynced().join(", ")} in 60 s`);
      await new Promise((r) => setTimeout(r, 20));
    }
    const load = await source.load();
    onSource?.(source);
    return load;
  } finally {
    await source.close();
    await client.close();
  }
}

/** loadCluster, translated as the controller translates (no implied GatewayClass). */
export async function loadAndTranslateCluster(kubeconfig: string, log: (line: string) => void): Promise<Loaded> {
  const load = await loadCluster(kubeconfig, log);
  return { load, result: translateLoad(load, { impliedGatewayClass: false, listenOnGatewayAddress: false }) };
}
