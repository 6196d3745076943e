// The unary gRPC server on node:http2 (ext_authz Check's hot path) against grpc-js as a real gRPC client:
// a call is answered, an unknown method is UNIMPLEMENTED, a failing handler is INTERNAL.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import {
  Authorization,
  CheckRequestSchema,
  CheckResponseSchema,
} from "../../src/gen/envoy/service/auth/v3/external_auth_pb.js";
import { createGrpcClient } from "../../src/grpc/service.js";
import { UnaryGrpcServer } from "../../src/grpc/unary-server.js";

let server: UnaryGrpcServer;
let port = 0;

before(async () => {
  server = new UnaryGrpcServer(
    new Map([
      [
        `/${Authorization.typeName}/Check`,
        async (bytes, headers) => {
          const req = fromBinary(CheckRequestSchema, bytes);
          if (req.attributes?.contextExtensions["fail"] === "yes") throw new Error("boom");
          const path = req.attributes?.request?.http?.path ?? "";
          return toBinary(
            CheckResponseSchema,
            create(CheckResponseSchema, {
              status: { code: path === "/ok" ? 0 : 7, message: String(headers["x-tag"]) },
            }),
          );
        },
      ],
    ]),
  );
  port = await server.start("127.0.0.1", 0);
});
after(() => server.stop());

function check(path: string, extensions: Record<string, string> = {}) {
  const client = createGrpcClient(Authorization, `127.0.0.1:${port}`, grpc.credentials.createInsecure());
  const md = new grpc.Metadata();
  md.set("x-tag", "t1");
  return new Promise<{ code: number; message: string }>((resolve, reject) => {
    client.check(
      create(CheckRequestSchema, { attributes: { request: { http: { path } }, contextExtensions: extensions } }),
      md,
      {},
      (e, r) => {
        client.close();
        if (e) reject(e);
        else resolve({ code: r?.status?.code ?? -1, message: r?.status?.message ?? "" });
      },
    );
  });
}

test("answers unary calls from a real gRPC client, with request metadata", async () => {
  assert.deepEqual(await check("/ok"), { code: 0, message: "t1" });
  assert.deepEqual(await check("/no"), { code: 7, message: "t1" });
  const many = await Promise.all(Array.from({ length: 200 }, (_, i) => check(i % 2 ? "/ok" : "/no")));
  assert.equal(many.filter((r) => r.code === 0).length, 100);
});

test("a failing handler is INTERNAL; an unknown method is UNIMPLEMENTED", async () => {
  await assert.rejects(check("/ok", { fail: "yes" }), (e: grpc.ServiceError) => e.code === grpc.status.INTERNAL);
  const client = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  await assert.rejects(
    new Promise((resolve, reject) =>
      client.makeUnaryRequest(
        "/nope.Service/Nope",
        (b: Buffer) => b,
        (b: Buffer) => b,
        Buffer.alloc(0),
        (e, r) => (e ? reject(e) : resolve(r)),
      ),
    ),
    (e: grpc.ServiceError) => e.code === grpc.status.UNIMPLEMENTED,
  );
  client.close();
});
