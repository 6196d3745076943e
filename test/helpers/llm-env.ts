// An end-to-end LLM environment: `sluice serve` with its services, a real Envoy fed over ADS, and a Gateway listener
// whose routes are given as YAML.

import { gatewayYaml } from "./gateway.js";
import { freePort, request, waitFor } from "./net.js";
import { type SluiceProcess, startSluice, startTestEnvoy, type TestEnvoy, tempConfigDir } from "./processes.js";

export interface LlmEnv {
  readonly port: number;
  readonly baseUrl: string;
  readonly sluice: SluiceProcess;
  readonly envoy: TestEnvoy;
  /** Replaces the resources (besides the Gateway) and waits for `ready` to hold. */
  write(yaml: string): void;
  stop(): Promise<void>;
}

/** Starts Sluice + Envoy with `yaml` and waits until `probePath` answers something other than 404. */
export async function startLlmEnv(
  yaml: string,
  probePath = "/v1/chat/completions",
  sluiceEnv?: Readonly<Record<string, string>>,
): Promise<LlmEnv> {
  const port = await freePort();
  const cfg = tempConfigDir();
  cfg.write("gateway.yaml", gatewayYaml(port));
  cfg.write("resources.yaml", yaml);
  const sluice = await startSluice("serve", cfg.dir, sluiceEnv !== undefined ? { env: sluiceEnv } : {});
  const envoy = await startTestEnvoy(sluice).catch(async (e: unknown) => {
    await sluice.stop();
    cfg.cleanup();
    throw e;
  });
  try {
    await waitFor(
      "the LLM route in Envoy",
      async () => {
        const r = await request(port, probePath, { method: "OPTIONS" }).catch(() => undefined);
        return r !== undefined && r.status !== 404 ? true : undefined;
      },
      20_000,
    );
  } catch (e) {
    // The caller never gets the environment to stop: nothing may outlive the failed start.
    await envoy.stop();
    await sluice.stop();
    cfg.cleanup();
    throw e;
  }
  return {
    port,
    baseUrl: `http://127.0.0.1:${port}`,
    sluice,
    envoy,
    write: (y) => cfg.write("resources.yaml", y),
    async stop() {
      await envoy.stop();
      await sluice.stop();
      cfg.cleanup();
    },
  };
}
