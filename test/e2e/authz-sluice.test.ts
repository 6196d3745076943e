// The authorization suite with every rule in Sluice's ext_authz (`--authorization-path sluice`).
import { authzSuite } from "./authz-suite.js";

authzSuite("sluice");
