// The authorization suite with rules that compile to RBAC running natively in Envoy.
import { authzSuite } from "./authz-suite.js";

authzSuite("auto");
