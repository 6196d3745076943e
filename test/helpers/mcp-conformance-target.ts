// An MCP target with the tools, resources and prompts the MCP conformance suite's server scenarios ask for (names and
// answers as the suite checks them), written here with the SDK's McpServer over its Streamable HTTP transport, so the
// suite can be run against Sluice in front of it.

import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { McpServer, ResourceTemplate } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { CreateMessageResultSchema, ElicitResultSchema } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";

/** A 1x1 PNG and a tiny WAV, base64. */
const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
const WAV = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";

function build(): McpServer {
  const s = new McpServer(
    { name: "sluice-conformance-target", version: "1.0.0" },
    {
      capabilities: {
        tools: { listChanged: true },
        resources: { subscribe: true, listChanged: true },
        prompts: { listChanged: true },
        logging: {},
        completions: {},
      },
    },
  );
  const text = (t: string) => ({ content: [{ type: "text" as const, text: t }] });
  s.registerTool("test_simple_text", { description: "simple text" }, async () =>
    text("This is a simple text response for testing."),
  );
  s.registerTool("test_image_content", { description: "image" }, async () => ({
    content: [{ type: "image", data: PNG, mimeType: "image/png" }],
  }));
  s.registerTool("test_audio_content", { description: "audio" }, async () => ({
    content: [{ type: "audio", data: WAV, mimeType: "audio/wav" }],
  }));
  s.registerTool("test_embedded_resource", { description: "embedded resource" }, async () => ({
    content: [
      {
        type: "resource",
        resource: {
          uri: "test://embedded-resource",
          mimeType: "text/plain",
          text: "This is an embedded resource content.",
        },
      },
    ],
  }));
  s.registerTool("test_multiple_content_types", { description: "text, image and resource" }, async () => ({
    content: [
      { type: "text", text: "Multiple content types test:" },
      { type: "image", data: PNG, mimeType: "image/png" },
      {
        type: "resource",
        resource: {
          uri: "test://mixed-content-resource",
          mimeType: "application/json",
          text: JSON.stringify({ test: "data", value: 123 }),
        },
      },
    ],
  }));
  s.registerTool(
    "test_tool_with_logging",
    { description: "logs while it runs", inputSchema: {} },
    async (_a, extra) => {
      for (const data of ["Tool execution started", "Tool processing data", "Tool execution completed"]) {
        await extra.sendNotification({ method: "notifications/message", params: { level: "info", data } });
        await new Promise((r) => setTimeout(r, 20));
      }
      return text("Tool with logging executed successfully");
    },
  );
  s.registerTool("test_tool_with_progress", { description: "reports progress", inputSchema: {} }, async (_a, extra) => {
    const progressToken = extra._meta?.progressToken ?? 0;
    for (const progress of [0, 50, 100]) {
      await extra.sendNotification({
        method: "notifications/progress",
        params: { progressToken, progress, total: 100, message: `Completed step ${progress} of 100` },
      });
      await new Promise((r) => setTimeout(r, 20));
    }
    return text(String(progressToken));
  });
  s.registerTool("test_error_handling", { description: "fails" }, async () => {
    throw new Error("This tool intentionally returns an error for testing");
  });
  s.registerTool(
    "test_sampling",
    { description: "asks the client's model", inputSchema: { prompt: z.string() } },
    async ({ prompt }) => {
      const r = await s.server.request(
        {
          method: "sampling/createMessage",
          params: { messages: [{ role: "user", content: { type: "text", text: prompt } }], maxTokens: 100 },
        },
        CreateMessageResultSchema,
      );
      return text(`LLM response: ${r.content.type === "text" ? r.content.text : "No response"}`);
    },
  );
  s.registerTool(
    "test_elicitation",
    { description: "asks the user", inputSchema: { message: z.string() } },
    async ({ message }) => {
      const r = await s.server.request(
        {
          method: "elicitation/create",
          params: {
            mode: "form",
            message,
            requestedSchema: {
              type: "object",
              properties: { response: { type: "string", description: "User's response" } },
              required: ["response"],
            },
          },
        },
        ElicitResultSchema,
      );
      return text(`User response: action=${r.action}, content=${JSON.stringify(r.content ?? {})}`);
    },
  );
  const resource = (uri: string, body: { text: string } | { blob: string }, mimeType: string) =>
    s.registerResource(uri.replace("test://", ""), uri, { mimeType, description: uri }, async () => ({
      contents: [{ uri, mimeType, ...body }],
    }));
  resource("test://static-text", { text: "This is the content of the static text resource." }, "text/plain");
  resource("test://static-binary", { blob: PNG }, "image/png");
  resource("test://watched-resource", { text: "Watched resource content" }, "text/plain");
  s.registerResource(
    "template",
    new ResourceTemplate("test://template/{id}/data", { list: undefined }),
    { mimeType: "application/json", description: "a template" },
    async (uri, vars) => ({
      contents: [
        {
          uri: uri.toString(),
          mimeType: "application/json",
          text: JSON.stringify({ id: vars["id"], templateTest: true, data: `Data for ID: ${String(vars["id"])}` }),
        },
      ],
    }),
  );
  s.server.setRequestHandler(
    z.object({ method: z.literal("resources/subscribe") }).passthrough() as never,
    async () => ({}),
  );
  s.server.setRequestHandler(
    z.object({ method: z.literal("resources/unsubscribe") }).passthrough() as never,
    async () => ({}),
  );
  s.registerPrompt("test_simple_prompt", { description: "no arguments" }, async () => ({
    messages: [{ role: "user", content: { type: "text", text: "This is a simple prompt for testing." } }],
  }));
  s.registerPrompt(
    "test_prompt_with_arguments",
    { description: "two arguments", argsSchema: { arg1: z.string(), arg2: z.string() } },
    async ({ arg1, arg2 }) => ({
      messages: [
        { role: "user", content: { type: "text", text: `Prompt with arguments: arg1='${arg1}', arg2='${arg2}'` } },
      ],
    }),
  );
  s.registerPrompt(
    "test_prompt_with_embedded_resource",
    { description: "embeds a resource", argsSchema: { resourceUri: z.string() } },
    async ({ resourceUri }) => ({
      messages: [
        {
          role: "user",
          content: {
            type: "resource",
            resource: { uri: resourceUri, mimeType: "text/plain", text: "Embedded resource content for testing." },
          },
        },
        { role: "user", content: { type: "text", text: "Please process the embedded resource above." } },
      ],
    }),
  );
  s.registerPrompt("test_prompt_with_image", { description: "an image" }, async () => ({
    messages: [
      { role: "user", content: { type: "image", data: PNG, mimeType: "image/png" } },
      { role: "user", content: { type: "text", text: "Please analyze the image above." } },
    ],
  }));
  s.server.setRequestHandler(
    z.object({ method: z.literal("logging/setLevel") }).passthrough() as never,
    async () => ({}),
  );
  s.server.setRequestHandler(
    z.object({ method: z.literal("completion/complete") }).passthrough() as never,
    async () => ({ completion: { values: [], total: 0, hasMore: false } }),
  );
  return s;
}

export interface ConformanceTarget {
  readonly port: number;
  stop(): Promise<void>;
}

export async function startConformanceTarget(): Promise<ConformanceTarget> {
  const transports = new Map<string, StreamableHTTPServerTransport>();
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const sid = req.headers["mcp-session-id"];
    let t = typeof sid === "string" ? transports.get(sid) : undefined;
    if (t === undefined) {
      if (req.method !== "POST" || sid !== undefined) {
        res.writeHead(404).end();
        return;
      }
      const created = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => {
          transports.set(id, created);
        },
        onsessionclosed: (id) => {
          transports.delete(id);
        },
      });
      await build().connect(created);
      t = created;
    }
    await t.handleRequest(req, res);
  };
  const server: Server = createServer((req, res) => {
    handle(req, res).catch((e: unknown) => {
      if (!res.headersSent) res.writeHead(500).end(String(e));
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  return {
    port: (server.address() as AddressInfo).port,
    async stop() {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
