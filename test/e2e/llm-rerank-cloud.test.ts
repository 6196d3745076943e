// Rerank (the Cohere v2 shape) to the cloud providers' own rerank APIs, through a real Envoy: Bedrock's agent runtime
// Rerank (SigV4 verified; one TEXT query, INLINE sources, a foundation model ARN) and Google's ranking API (Discovery
// Engine rankingConfigs.rank with a token Google's token endpoint issued; records with ids, at most 200). The fakes
// refuse what the services refuse, so a malformed translation fails here; answers come back in the client's shape,
// best first, and a provider at its default host (where these APIs are not) is refused without a call.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { type FakeGoogleAuth, startFakeGoogleAuth } from "../helpers/fake-google-auth.js";
import { type FakeProvider, startFakeProvider } from "../helpers/fake-providers.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { request } from "../helpers/net.js";

const AWS = {
  accessKeyId: "AKIDEXAMPLE",
  secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
  region: "eu-west-1",
};

function resources(bedrock: number, vertex: number, google: FakeGoogleAuth): string {
  const backend = (name: string, provider: string, auth: string) => `---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: ${name}, namespace: default }
spec:
  ai:
    provider:
      ${provider}
  policies:
    auth: ${auth}
    ai:
      routes: { /v2/rerank: Rerank }
`;
  const rule = (name: string) => `
    - matches: [{ path: { type: PathPrefix, value: /${name}/ } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: ${name} }]`;
  return `
apiVersion: v1
kind: Secret
metadata: { name: aws, namespace: default }
stringData: { accessKey: ${AWS.accessKeyId}, secretKey: ${AWS.secretAccessKey} }
---
apiVersion: v1
kind: Secret
metadata: { name: gcp, namespace: default }
stringData:
  credentials.json: ${JSON.stringify(JSON.stringify(google.serviceAccount))}
${backend("bedrock", `providerG: { region: ${AWS.region} }\n      host: 127.0.0.1\n      port: ${bedrock}`, "{ cloudA: { secretRef: { name: aws } } }")}
${backend("vertex", `providerF: { projectId: my-project }\n      host: 127.0.0.1\n      port: ${vertex}`, "{ cloudB: { secretRef: { name: gcp } } }")}
${backend("bedrockdefault", `providerG: { region: ${AWS.region} }`, "{ cloudA: { secretRef: { name: aws } } }")}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: llm, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:${rule("bedrock")}${rule("vertex")}${rule("bedrockdefault")}
`;
}

const documents = ["a cooking recipe", "Envoy is a gateway proxy", { text: "gateway api" }];

interface Answer {
  results: { index: number; relevance_score: number; document?: unknown }[];
}

describe("rerank to Bedrock's Rerank and Google's ranking API", { timeout: 60_000 }, () => {
  let google: FakeGoogleAuth;
  let bedrock: FakeProvider;
  let vertex: FakeProvider;
  let env: LlmEnv;
  const rerank = (prefix: string, body: Record<string, unknown>) =>
    request(env.port, `/${prefix}/v2/rerank`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: "Bearer client" },
      body: JSON.stringify(body),
    });

  before(async () => {
    google = await startFakeGoogleAuth();
    bedrock = await startFakeProvider({ name: "bedrock", aws: AWS });
    vertex = await startFakeProvider({ name: "vertex", bearer: (t) => google.issued(t) });
    env = await startLlmEnv(resources(bedrock.port, vertex.port, google), "/bedrock/v2/rerank", {
      GCE_METADATA_HOST: `127.0.0.1:${google.port}`,
    });
  });
  after(async () => {
    await env?.stop();
    await bedrock?.close();
    await vertex?.close();
    await google?.close();
  });

  test("Bedrock: a signed Rerank with the model's ARN in the provider's region; results best first", async () => {
    const r = await rerank("bedrock", { model: "cohere.rerank-v3-5:0", query: "envoy gateway", documents, top_n: 2 });
    assert.equal(r.status, 200, r.body);
    const a = JSON.parse(r.body) as Answer;
    assert.deepEqual(
      a.results.map((x) => x.index),
      [1, 2],
    );
    assert.equal(a.results[0]?.relevance_score, 1);
    const seen = bedrock.requests.at(-1);
    assert.equal(seen?.path, "/rerank");
    assert.deepEqual(seen?.json?.queries, [{ type: "TEXT", textQuery: { text: "envoy gateway" } }]);
    assert.deepEqual(((seen?.json?.sources ?? []) as unknown[])[2], {
      type: "INLINE",
      inlineDocumentSource: { type: "TEXT", textDocument: { text: "gateway api" } },
    });
    assert.deepEqual(seen?.json?.rerankingConfiguration, {
      type: "BEDROCK_RERANKING_MODEL",
      bedrockRerankingConfiguration: {
        modelConfiguration: { modelArn: `arn:aws:bedrock:${AWS.region}::foundation-model/cohere.rerank-v3-5:0` },
        numberOfResults: 2,
      },
    });
  });

  test("Bedrock: return_documents puts each document back; a top_n above the count asks for all", async () => {
    const r = await rerank("bedrock", {
      model: "amazon.rerank-v1:0",
      query: "gateway",
      documents: documents.slice(0, 2),
      top_n: 5,
      return_documents: true,
    });
    assert.equal(r.status, 200, r.body);
    const a = JSON.parse(r.body) as Answer;
    assert.deepEqual(a.results[0], { index: 1, relevance_score: 1, document: { text: "Envoy is a gateway proxy" } });
    assert.equal(a.results.length, 2);
  });

  test("Google: records with ids on the project's default ranking config, with a Google token", async () => {
    const r = await rerank("vertex", {
      model: "semantic-ranker-default@latest",
      query: "envoy gateway",
      documents,
      top_n: 2,
    });
    assert.equal(r.status, 200, r.body);
    const a = JSON.parse(r.body) as Answer;
    assert.deepEqual(
      a.results.map((x) => x.index),
      [1, 2],
    );
    const seen = vertex.requests.at(-1);
    assert.equal(seen?.path, "/v1/projects/my-project/locations/global/rankingConfigs/default_ranking_config:rank");
    assert.deepEqual(seen?.json, {
      model: "semantic-ranker-default@latest",
      query: "envoy gateway",
      records: [
        { id: "0", content: "a cooking recipe" },
        { id: "1", content: "Envoy is a gateway proxy" },
        { id: "2", content: "gateway api" },
      ],
      ignoreRecordDetailsInResponse: true,
      topN: 2,
    });
  });

  test("what the API cannot take is the client's 400 naming it; the provider is not called", async () => {
    const before = vertex.requests.length;
    const many = await rerank("vertex", {
      model: "semantic-ranker-default@latest",
      query: "q",
      documents: Array.from({ length: 201 }, (_, i) => `doc ${i}`),
    });
    assert.equal(many.status, 400, many.body);
    assert.match(many.body, /"param":"documents"/);
    const cut = await rerank("vertex", { model: "m", query: "q", documents: ["a"], max_tokens_per_doc: 10 });
    assert.equal(cut.status, 400);
    assert.match(cut.body, /max_tokens_per_doc/);
    assert.equal(vertex.requests.length, before);
  });

  test("a providerG at its default host (bedrock-runtime, where Rerank is not) is refused with 501", async () => {
    const r = await rerank("bedrockdefault", { model: "cohere.rerank-v3-5:0", query: "q", documents: ["a"] });
    assert.equal(r.status, 501, r.body);
    assert.match(r.body, /does not serve Rerank requests/);
  });
});
