// The authorization suite with every rule in Sluice's ext_authz (`--authorization-path sluice`): over HTTP where the
// policy reads only the request and its source, over gRPC otherwise.
import { authzSuite } from "./authz-suite.js";

authzSuite("sluice");
