// The authorization suite with every rule in Sluice's ext_authz, always over gRPC (`--authorization-path sluice-grpc`),
// so the cases that authz-sluice.test.ts checks over HTTP also run over the gRPC check.
import { authzSuite } from "./authz-suite.js";

authzSuite("sluice-grpc");
