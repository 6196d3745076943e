// The registered HTTP filter builders. Order in the chain comes from each instance's `order`, not from this list.

import { llmExtProcBuilder } from "../llm.js";
import { a2aBuilder } from "./a2a.js";
import { contextBuilder } from "./context.js";
import { dynamicForwardProxyBuilder } from "./dynamic-forward-proxy.js";
import { extAuthzBuilder } from "./ext-authz.js";
import { sluiceExtAuthzBuilder } from "./ext-authz-sluice.js";
import { extProcBuilder } from "./ext-proc.js";
import { globalRateLimitBuilder } from "./global-ratelimit.js";
import { endpointPickerBuilder } from "./inference-pool.js";
import { jwtAuthnBuilder } from "./jwt-authn.js";
import { localRateLimitBuilder } from "./local-ratelimit.js";
import { rbacBuilder } from "./rbac.js";
import { bufferBuilder, corsBuilder, csrfBuilder, faultBuilder } from "./route-scoped.js";
import { transformationBuilder } from "./transformation.js";
import type { HttpFilterBuilder } from "./types.js";

export const HTTP_FILTER_BUILDERS: readonly HttpFilterBuilder[] = [
  corsBuilder,
  contextBuilder,
  jwtAuthnBuilder,
  sluiceExtAuthzBuilder,
  extAuthzBuilder,
  rbacBuilder,
  localRateLimitBuilder,
  globalRateLimitBuilder,
  bufferBuilder,
  extProcBuilder,
  transformationBuilder,
  a2aBuilder,
  llmExtProcBuilder,
  endpointPickerBuilder,
  csrfBuilder,
  dynamicForwardProxyBuilder,
  faultBuilder,
];
