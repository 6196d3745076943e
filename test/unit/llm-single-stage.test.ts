// The router-level LLM ext_proc on a route served in one stage (src/extproc/llm/service.ts), driven message by
// message as Envoy drives it: the provider work answers the request body synchronously when no Google token is
// needed; while a token is fetched, later messages wait, so answers keep Envoy's order; a token that cannot be had
// answers in the client's format. End to end through Envoy: test/e2e/llm-stages.test.ts.

import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import { EventEmitter } from "node:events";
import { after, before, test } from "node:test";
import { create, fromBinary, type MessageInitShape, toBinary } from "@bufbuild/protobuf";
import { loadAndTranslate } from "../../src/cli/load.js";
import { LlmExtProcService } from "../../src/extproc/llm/service.js";
import {
  CommonResponse_ResponseStatus,
  ProcessingRequestSchema,
  type ProcessingResponse,
  ProcessingResponseSchema,
} from "../../src/gen/envoy/service/ext_proc/v3/external_processor_pb.js";
import type { BidiCall } from "../../src/grpc/unary-server.js";
import { LLM_CLUSTER_ATTRIBUTE, LLM_SINGLE_PROVIDER_ATTRIBUTE } from "../../src/translate/llm/table.js";
import type { TranslationResult } from "../../src/translate/translate.js";
import { type FakeGoogleAuth, startFakeGoogleAuth } from "../helpers/fake-google-auth.js";
import { gatewayYaml } from "../helpers/gateway.js";
import { waitFor } from "../helpers/net.js";
import { tempConfigDir } from "../helpers/processes.js";

const te = new TextEncoder();
const td = new TextDecoder();

let google: FakeGoogleAuth;
let result: TranslationResult;
const service = new LlmExtProcService();

function resources(g: FakeGoogleAuth): string {
  const otherKey = generateKeyPairSync("rsa", { modulusLength: 2048 })
    .privateKey.export({ type: "pkcs8", format: "pem" })
    .toString();
  const json = (o: unknown) => JSON.stringify(JSON.stringify(o));
  const backend = (name: string, provider: string, policies: string) => `---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: ${name}, namespace: default }
spec:
  ai:
    provider: { ${provider}, host: 127.0.0.1, port: 9 }
  policies: ${policies}
`;
  const rule = (name: string) => `
    - matches: [{ path: { type: PathPrefix, value: /${name} } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: ${name} }]`;
  return `${gatewayYaml(8080)}---
apiVersion: v1
kind: Secret
metadata: { name: gcp, namespace: default }
stringData: { credentials.json: ${json(g.serviceAccount)} }
---
apiVersion: v1
kind: Secret
metadata: { name: gcp-wrong-key, namespace: default }
stringData: { credentials.json: ${json({ ...g.serviceAccount, private_key: otherKey })} }
${backend("openai", "providerA: {}", "{ auth: { key: sk-openai } }")}${backend(
  "vertex",
  "providerF: { projectId: p, region: us-central1, model: gemini-2.0-flash }",
  "{ auth: { cloudB: { secretRef: { name: gcp } } } }",
)}${backend(
  "wrongkey",
  "providerF: { projectId: p, region: us-central1, model: gemini-2.0-flash }",
  "{ auth: { cloudB: { secretRef: { name: gcp-wrong-key } } } }",
)}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: llm, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:${rule("openai")}${rule("vertex")}${rule("wrongkey")}
`;
}

before(async () => {
  google = await startFakeGoogleAuth();
  const cfg = tempConfigDir();
  try {
    cfg.write("config.yaml", resources(google));
    result = (await loadAndTranslate([cfg.dir])).result;
  } finally {
    cfg.cleanup();
  }
  service.update(result);
});
after(() => google?.close());

/** A Process call as the hot-path gRPC server hands it to the service, recording what the service answers. */
class Call extends EventEmitter implements BidiCall {
  readonly written: ProcessingResponse[] = [];
  ended = false;
  constructor(readonly headers: Record<string, string>) {
    super();
    const handler = service.bidi.get("/envoy.service.ext_proc.v3.ExternalProcessor/Process");
    assert.ok(handler !== undefined);
    handler(this);
  }
  write(message: Uint8Array): void {
    this.written.push(fromBinary(ProcessingResponseSchema, message));
  }
  end(): void {
    this.ended = true;
  }
  send(
    request: NonNullable<MessageInitShape<typeof ProcessingRequestSchema>["request"]>,
    attributes: Record<string, string> = {},
  ): void {
    const init = { request, attributes: { "envoy.filters.http.ext_proc": attributes } };
    this.emit("data", toBinary(ProcessingRequestSchema, create(ProcessingRequestSchema, init)));
  }
}

/** The router-level stage of the route to GwBackend `backend` (rule `index` of the HTTPRoute). */
function routerCall(index: number): Call {
  const id = result.llm.routes.get(`default/gw|httproute/default/llm/rule/${index}/match/0`);
  assert.ok(id !== undefined && result.llm.entries.get(id)?.single !== undefined, "a route served in one stage");
  return new Call({ "x-sluice-llm-entry": id });
}

const headers = (h: Record<string, string>) => ({
  headers: Object.entries(h).map(([key, v]) => ({ key, rawValue: te.encode(v) })),
});
const requestHeaders = (path: string) =>
  ({
    case: "requestHeaders",
    value: { headers: headers({ ":path": path, ":method": "POST", authorization: "Bearer client-key" }) },
  }) as const;
const chatBody = {
  case: "requestBody",
  value: {
    body: te.encode(JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }] })),
    endOfStream: true,
  },
} as const;

/** The headers a response sets, and the ones it removes. */
function mutationOf(r: ProcessingResponse | undefined): { set: Record<string, string>; remove: string[] } {
  const common =
    r?.response.case === "requestBody" || r?.response.case === "requestHeaders" ? r.response.value.response : undefined;
  const set: Record<string, string> = {};
  for (const h of common?.headerMutation?.setHeaders ?? []) set[h.header?.key ?? ""] = td.decode(h.header?.rawValue);
  return { set, remove: [...(common?.headerMutation?.removeHeaders ?? [])] };
}

test("no Google token: the provider's request replaces the client's on the body message, at once", () => {
  const call = routerCall(0);
  call.send(requestHeaders("/openai/v1/chat/completions"));
  call.send(chatBody);
  assert.equal(call.written.length, 2, "both answered synchronously");
  const body = call.written[1];
  assert.equal(body?.response.case, "requestBody");
  const common = body?.response.case === "requestBody" ? body.response.value.response : undefined;
  assert.equal(common?.status, CommonResponse_ResponseStatus.CONTINUE_AND_REPLACE);
  const { set, remove } = mutationOf(body);
  assert.equal(set[":path"], "/v1/chat/completions");
  assert.equal(set[":authority"], "127.0.0.1:9");
  assert.equal(set.authorization, "Bearer sk-openai");
  assert.ok(remove.includes("x-api-key") && remove.includes("accept-encoding"));
  const replaced = common?.bodyMutation?.mutation;
  assert.equal(replaced?.case, "body");
  assert.equal(set["content-length"], String(replaced?.case === "body" ? replaced.value.byteLength : -1));

  // An upstream stage the cluster keeps for other routes lets this request through untouched.
  const requestId = mutationOf(call.written[0]).set["x-sluice-llm-id"] ?? "";
  const upstream = new Call({ "x-sluice-llm-stage": "upstream" });
  upstream.send({ case: "requestHeaders", value: { headers: headers({ "x-sluice-llm-id": requestId }) } });
  return waitFor("the upstream stage to answer", async () => (upstream.ended ? true : undefined)).then(() => {
    assert.equal(upstream.written.length, 1);
    assert.deepEqual(mutationOf(upstream.written[0]), { set: {}, remove: [] });
  });
});

test("an entry expecting an upstream stage, to a cluster Envoy has without one (CDS before RDS): served in one stage", () => {
  const id = result.llm.routes.get("default/gw|httproute/default/llm/rule/0/match/0") ?? "";
  const entry = result.llm.entries.get(id);
  assert.ok(entry?.single !== undefined);
  // The route's previous entry, from when its cluster still had the upstream stage.
  const { single, ...twoStage } = entry;
  const entries = new Map([...result.llm.entries, ["two-stage", twoStage]]);
  service.update({ ...result, llm: { ...result.llm, entries } });
  const call = new Call({ "x-sluice-llm-entry": "two-stage" });
  const attributes = { [LLM_CLUSTER_ATTRIBUTE]: single.cluster, [LLM_SINGLE_PROVIDER_ATTRIBUTE]: single.provider };
  call.send(requestHeaders("/openai/v1/chat/completions"), attributes);
  call.send(chatBody);
  const { set } = mutationOf(call.written[1]);
  assert.equal(set[":authority"], "127.0.0.1:9", "the provider's request, not the client's");
  assert.equal(set.authorization, "Bearer sk-openai");

  // Without the cluster's mark, the same entry leaves the provider work to the upstream stage.
  const other = new Call({ "x-sluice-llm-entry": "two-stage" });
  other.send(requestHeaders("/openai/v1/chat/completions"), { [LLM_CLUSTER_ATTRIBUTE]: single.cluster });
  other.send(chatBody);
  assert.deepEqual(mutationOf(other.written[1]), { set: {}, remove: [] });
});

test("while a Google token is fetched, later messages wait: answers keep their order", async () => {
  const call = routerCall(1);
  call.send(requestHeaders("/vertex/v1/chat/completions"));
  call.send(chatBody);
  // Envoy would not send this before the body's answer; the service keeps the order even so.
  call.send({ case: "responseHeaders", value: { headers: headers({ ":status": "200" }) } });
  assert.equal(call.written.length, 1, "the body waits for the token");
  await waitFor("three answers", async () => (call.written.length === 3 ? true : undefined));
  assert.deepEqual(
    call.written.map((w) => w.response.case),
    ["requestHeaders", "requestBody", "responseHeaders"],
  );
  const { set } = mutationOf(call.written[1]);
  assert.match(set[":path"] ?? "", /\/models\/gemini-2\.0-flash:generateContent$/);
  const token = /^Bearer (.+)$/.exec(set.authorization ?? "")?.[1];
  assert.ok(token !== undefined && google.issued(token), set.authorization);
});

test("a Google token that cannot be had: a 500 in the client's format, and the exchange ends", async () => {
  const call = routerCall(2);
  call.send(requestHeaders("/wrongkey/v1/chat/completions"));
  call.send(chatBody);
  await waitFor("the error", async () => (call.ended ? true : undefined));
  const last = call.written.at(-1);
  assert.equal(last?.response.case, "immediateResponse");
  if (last?.response.case !== "immediateResponse") return;
  assert.equal(last.response.value.status?.code, 500);
  const error = (JSON.parse(td.decode(last.response.value.body)) as { error?: { message?: string } }).error;
  assert.match(error?.message ?? "", /credentials of provider default are not available/);
});
