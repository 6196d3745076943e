// The gRPC services Sluice serves to Envoy besides ADS (ext_authz, ext_proc), on the ADS port. Envoy reaches them
// through the bootstrap's `sluice_services` cluster. Each service gets every new translation result, from which it
// takes its policy tables.

import type * as grpc from "@grpc/grpc-js";
import { LlmExtProcService } from "../extproc/llm/service.js";
import type { TranslationResult } from "../translate/translate.js";

export interface SluiceService {
  readonly name: string;
  addTo(server: grpc.Server): void;
  /** Called after every translation, before the new snapshot is published, so Envoy never sees an unknown id. */
  update(result: TranslationResult): void;
}

export interface ServiceOptions {
  readonly log: (line: string) => void;
}

/** The services `sluice serve` and `sluice run` host. */
export function defaultServices(opts: ServiceOptions): SluiceService[] {
  return [new LlmExtProcService({ log: opts.log })];
}
