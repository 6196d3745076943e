// The registered HTTP filter builders. Order in the chain comes from each instance's `order`, not from this list.

import { llmExtProcBuilder } from "../llm.js";
import { sluiceExtAuthzBuilder } from "./ext-authz-sluice.js";
import { jwtAuthnBuilder } from "./jwt-authn.js";
import { rbacBuilder } from "./rbac.js";
import type { HttpFilterBuilder } from "./types.js";

export const HTTP_FILTER_BUILDERS: readonly HttpFilterBuilder[] = [
  jwtAuthnBuilder,
  sluiceExtAuthzBuilder,
  rbacBuilder,
  llmExtProcBuilder,
];
