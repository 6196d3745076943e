// The registered HTTP filter builders. Order in the chain comes from each instance's `order`, not from this list.

import { extAuthzBuilder } from "./ext-authz.js";
import { extProcBuilder } from "./ext-proc.js";
import { globalRateLimitBuilder } from "./global-ratelimit.js";
import { jwtAuthnBuilder } from "./jwt-authn.js";
import { localRateLimitBuilder } from "./local-ratelimit.js";
import { bufferBuilder, corsBuilder, csrfBuilder, faultBuilder } from "./route-scoped.js";
import type { HttpFilterBuilder } from "./types.js";

export const HTTP_FILTER_BUILDERS: readonly HttpFilterBuilder[] = [
  corsBuilder,
  jwtAuthnBuilder,
  extAuthzBuilder,
  localRateLimitBuilder,
  globalRateLimitBuilder,
  bufferBuilder,
  extProcBuilder,
  csrfBuilder,
  faultBuilder,
];
