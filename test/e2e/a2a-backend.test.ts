// GwBackend `a2a` end to end: an agent written with @a2a-js/sdk's server (express, JSON-RPC), reached through a real
// Envoy with @a2a-js/sdk's client. The agent card the client reads through the Gateway names the Gateway's address
// (the agent publishes its own), so the client's JSON-RPC calls go through the Gateway, where a GwPolicy on the route
// and the GwBackend's own policies apply (a header the route sets and a credential the backend injects, both seen by
// the agent on every call); a streamed answer (SSE) reaches the client event by event: the agent sends each event only
// after the client has read the one before, so a buffered stream would stall the test.

import assert from "node:assert/strict";
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import { createRequire } from "node:module";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import type { AgentCard, Message } from "@a2a-js/sdk";
import { ClientFactory } from "@a2a-js/sdk/client";
import {
  AgentEvent,
  type AgentExecutor,
  DefaultRequestHandler,
  type ExecutionEventBus,
  InMemoryTaskStore,
  type RequestContext,
} from "@a2a-js/sdk/server";
import { agentCardHandler, jsonRpcHandler, UserBuilder } from "@a2a-js/sdk/server/express";
import { startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { request } from "../helpers/net.js";

// express (the SDK server's transport) without its type package: the little of it used here.
type Next = (e?: unknown) => void;
type Handler = (req: IncomingMessage, res: ServerResponse, next: Next) => void;
interface ExpressApp {
  use(path: string, h: Handler): void;
  use(h: Handler): void;
  listen(port: number, host: string, ready: () => void): Server;
}
const express = createRequire(import.meta.url)("express") as () => ExpressApp;

const ROLE_AGENT = 2;
const TASK_STATE_WORKING = 2;
const TASK_STATE_COMPLETED = 3;

function agentMessage(text: string, contextId: string, taskId = ""): Message {
  return {
    messageId: `m-${Math.random().toString(36).slice(2)}`,
    contextId,
    taskId,
    role: ROLE_AGENT,
    parts: [{ content: { $case: "text", value: text }, metadata: undefined, filename: "", mediaType: "text/plain" }],
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  } as Message;
}

function textOf(m: Message | undefined): string {
  const c = m?.parts[0]?.content;
  return c?.$case === "text" ? c.value : "";
}

/** The agent: echoes a message; for a streamed call, three status updates, each after the client read the last. */
class EchoAgent implements AgentExecutor {
  #waiting = new Map<number, () => void>();
  /** The test has read event i of the stream. */
  clientRead(i: number): void {
    this.#waiting.get(i)?.();
  }
  #afterRead(i: number): Promise<void> {
    return new Promise((resolve) => this.#waiting.set(i, resolve));
  }
  async execute(ctx: RequestContext, bus: ExecutionEventBus): Promise<void> {
    const text = textOf(ctx.userMessage);
    if (!text.startsWith("stream")) {
      bus.publish(AgentEvent.message(agentMessage(`echo: ${text}`, ctx.contextId)));
      bus.finished();
      return;
    }
    const status = (state: number, t: string) => ({ state, message: agentMessage(t, ctx.contextId, ctx.taskId) });
    bus.publish(
      AgentEvent.task({
        id: ctx.taskId,
        contextId: ctx.contextId,
        status: status(TASK_STATE_WORKING, "started"),
        artifacts: [],
        history: [],
        metadata: undefined,
      } as never),
    );
    for (let i = 1; i <= 3; i++) {
      await this.#afterRead(i - 1);
      const done = i === 3;
      bus.publish(
        AgentEvent.statusUpdate({
          taskId: ctx.taskId,
          contextId: ctx.contextId,
          status: status(done ? TASK_STATE_COMPLETED : TASK_STATE_WORKING, `part ${i}`),
          metadata: undefined,
        } as never),
      );
    }
    bus.finished();
  }
  async cancelTask(): Promise<void> {}
}

describe("GwBackend a2a through Envoy with the @a2a-js/sdk client and server", { timeout: 90_000 }, () => {
  let agentServer: Server;
  let agentPort = 0;
  let gw: TestGateway;
  const agent = new EchoAgent();
  /** What the agent saw of each JSON-RPC call. */
  const calls: { via: string | undefined; auth: string | undefined }[] = [];

  before(async () => {
    const app = express();
    // The card names the agent's port, known once it listens: the handlers are made then.
    let card: Handler | undefined;
    let rpc: Handler | undefined;
    app.use((req, _res, next) => {
      const h = (name: string) => {
        const v = req.headers[name];
        return Array.isArray(v) ? v.join(",") : v;
      };
      if (req.method === "POST") calls.push({ via: h("x-via-gateway"), auth: h("authorization") });
      next();
    });
    app.use("/.well-known/agent-card.json", (req, res, next) => card?.(req, res, next));
    app.use("/a2a/jsonrpc", (req, res, next) => rpc?.(req, res, next));
    agentServer = await new Promise<Server>((resolve) => {
      const s = app.listen(0, "127.0.0.1", () => resolve(s));
    });
    agentPort = (agentServer.address() as AddressInfo).port;
    const agentCard = {
      name: "echo",
      description: "Echoes what it is told.",
      supportedInterfaces: [
        {
          url: `http://127.0.0.1:${agentPort}/a2a/jsonrpc`,
          protocolBinding: "JSONRPC",
          protocolVersion: "1.0",
          tenant: "",
        },
      ],
      provider: undefined,
      version: "1.0.0",
      capabilities: { streaming: true, extensions: [] },
      securitySchemes: {},
      securityRequirements: [],
      defaultInputModes: ["text/plain"],
      defaultOutputModes: ["text/plain"],
      skills: [],
      signatures: [],
    } as unknown as AgentCard;
    const handler = new DefaultRequestHandler(agentCard, new InMemoryTaskStore(), agent);
    card = agentCardHandler({ agentCardProvider: handler }) as Handler;
    rpc = jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }) as Handler;
    gw = await startTestGateway(
      () => `---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: agent, namespace: default }
spec:
  a2a: { host: 127.0.0.1, port: ${agentPort} }
  policies:
    auth: { key: agent-secret }
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - backendRefs: [{ group: sluice.dev, kind: GwBackend, name: agent }]
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: via, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: HTTPRoute, name: r }]
  traffic:
    headerModifiers:
      request:
        set: [{ name: x-via-gateway, value: "yes" }]
`,
      "/.well-known/agent-card.json",
      (s) => s === 200,
    );
  });
  after(async () => {
    await gw?.stop();
    await new Promise((r) => agentServer?.close(r));
  });

  test("the agent card names the Gateway's address through the Gateway, the agent's own directly", async () => {
    const through = await request(gw.port, "/.well-known/agent-card.json", { headers: { "accept-encoding": "gzip" } });
    assert.equal(through.status, 200);
    const card = JSON.parse(through.body) as { name: string; supportedInterfaces: { url: string }[] };
    assert.equal(card.name, "echo");
    assert.deepEqual(
      card.supportedInterfaces.map((i) => i.url),
      [`http://127.0.0.1:${gw.port}/a2a/jsonrpc`],
    );
    assert.equal(through.headers["content-length"], String(Buffer.byteLength(through.body)));
    const direct = await request(agentPort, "/.well-known/agent-card.json");
    const own = JSON.parse(direct.body) as { supportedInterfaces: { url: string }[] };
    assert.equal(own.supportedInterfaces[0]?.url, `http://127.0.0.1:${agentPort}/a2a/jsonrpc`);
  });

  test("JSON-RPC from the SDK client goes through the Gateway, with the route's and the backend's policies", async () => {
    calls.length = 0;
    const client = await new ClientFactory().createFromUrl(`http://127.0.0.1:${gw.port}`);
    const result = await client.sendMessage({
      tenant: "",
      message: {
        messageId: "u1",
        contextId: "",
        taskId: "",
        role: 1,
        parts: [{ content: { $case: "text", value: "hello" }, metadata: undefined, filename: "", mediaType: "" }],
        metadata: undefined,
        extensions: [],
        referenceTaskIds: [],
      },
      configuration: undefined,
      metadata: undefined,
    } as never);
    const reply = (result as { payload?: { $case: string; value: Message } }).payload ?? result;
    const message = ("value" in (reply as object) ? (reply as { value: Message }).value : reply) as Message;
    assert.equal(textOf(message), "echo: hello");
    assert.ok(calls.length >= 1, "the agent was called");
    for (const c of calls) {
      assert.equal(c.via, "yes", "the route's GwPolicy applied (the call came through the Gateway)");
      assert.equal(c.auth, "Bearer agent-secret", "the GwBackend's credential injected");
    }
  });

  test("a streamed answer (SSE) reaches the client event by event, not buffered", async () => {
    calls.length = 0;
    const client = await new ClientFactory().createFromUrl(`http://127.0.0.1:${gw.port}`);
    const seen: string[] = [];
    const stream = client.sendMessageStream({
      tenant: "",
      message: {
        messageId: "u2",
        contextId: "",
        taskId: "",
        role: 1,
        parts: [
          { content: { $case: "text", value: "stream please" }, metadata: undefined, filename: "", mediaType: "" },
        ],
        metadata: undefined,
        extensions: [],
        referenceTaskIds: [],
      },
      configuration: undefined,
      metadata: undefined,
    } as never);
    let read = 0;
    for await (const event of stream) {
      const p = event.payload;
      if (p?.$case === "task") seen.push(`task ${textOf(p.value.status?.message)}`);
      else if (p?.$case === "statusUpdate") seen.push(`status ${textOf(p.value.status?.message)}`);
      // The agent sends the next event only now: a stream held back anywhere on the way would stop here.
      agent.clientRead(read++);
    }
    assert.deepEqual(seen, ["task started", "status part 1", "status part 2", "status part 3"]);
    assert.equal(calls.length, 1);
    assert.equal(calls[0]?.via, "yes");
  });
});
