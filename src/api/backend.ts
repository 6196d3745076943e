// GwBackend (Document 2): static, dynamic forward proxy, LLM providers, MCP targets, A2A, cloud agent runtime.

import { BackendFull, BackendSimple, BackendWithAI } from "./backend-policy.js";
import {
  HostName,
  LabelSelector,
  LocalBackendObjectReference,
  LocalObjectReference,
  PortNumber,
  SectionName,
  ShortString,
  UpstreamPath,
} from "./common.js";
import {
  Arr,
  atMostOne,
  Empty,
  Enum,
  exactlyOne,
  has,
  Obj,
  Opt,
  RULES,
  type Rule,
  rule,
  type Static,
  Str,
  withDoc,
} from "./schema-kit.js";

export const PROVIDER_FORMATS = [
  "Completions",
  "Messages",
  "Responses",
  "Embeddings",
  "MessagesTokenCount",
  "Realtime",
  "Rerank",
] as const;

const modelOverride = Opt(withDoc(ShortString, "Overrides the model name; unset uses the name from the request."));

export const ProviderB = Obj(
  {
    endpoint: Str({
      min: 1,
      max: 256,
      // The spec: a host, whose scheme is stripped (and a trailing /, as written by a copy of the portal's URL).
      pattern: "^([a-zA-Z]+://)?[^/?#@\\s]+/*$",
      patternMessage: "must be a host such as <name>.openai.azure.com (a scheme is allowed and stripped), without path",
      description: "Host such as <name>.<domain>; a scheme is stripped.",
    }),
    deploymentName: Opt(withDoc(ShortString, "Required unless apiVersion is v1.")),
    apiVersion: Opt(withDoc(Str({ min: 1, max: 64, default: "v1" }), "API version; v1 needs no deployment.")),
  },
  {
    rules: [
      rule({
        rule: "has(self.deploymentName) || !has(self.apiVersion) || self.apiVersion == 'v1'",
        message: "deploymentName is required unless apiVersion is v1",
        fieldPath: ".deploymentName",
        check: (s) => has(s, "deploymentName") || !has(s, "apiVersion") || s.apiVersion === "v1",
      }),
    ],
  },
);

const foundryNeedsProject: Rule = rule({
  rule: "!has(self.resourceType) || self.resourceType != 'Foundry' || has(self.projectName)",
  message: "projectName is required when resourceType is Foundry",
  fieldPath: ".projectName",
  check: (s) => s?.resourceType !== "Foundry" || has(s, "projectName"),
});
// The OpenAI resource type has no project in its paths: a projectName there would be read by nobody (issue 22).
const projectOnlyForFoundry: Rule = rule({
  rule: "!has(self.projectName) || (has(self.resourceType) && self.resourceType == 'Foundry')",
  message: "projectName is only valid with resourceType Foundry (the OpenAI resource type has no project)",
  fieldPath: ".projectName",
  check: (s) => !has(s, "projectName") || s?.resourceType === "Foundry",
});

export const CloudCProvider = Obj(
  {
    resourceName: withDoc(ShortString, "Forms the host with the suffix of resourceType."),
    resourceType: Enum(["OpenAI", "Foundry"]),
    apiVersion: Opt(Str({ min: 1, max: 64, default: "v1" })),
    projectName: Opt(withDoc(ShortString, "Required for Foundry: /api/projects/{projectName}/...")),
    model: modelOverride,
  },
  { rules: [foundryNeedsProject, projectOnlyForFoundry] },
);

export const CloudCModelSettings = Obj(
  {
    resourceName: ShortString,
    resourceType: Enum(["OpenAI", "Foundry"]),
    apiVersion: Opt(Str({ min: 1, max: 64, default: "v1" })),
    projectName: Opt(ShortString),
  },
  { rules: [foundryNeedsProject, projectOnlyForFoundry] },
);

export const ProviderFSettings = Obj(
  {
    projectId: withDoc(ShortString, "Google Cloud project: Vertex AI puts it in every request path."),
    region: Opt(ShortString),
    model: modelOverride,
  },
  "providerF settings.",
);
/** A providerF of a GwBackend names its project: Vertex AI puts it in every request path. */
export const ProviderF = Obj(
  {
    projectId: withDoc(ShortString, "Google Cloud project of the Vertex AI endpoint."),
    region: Opt(withDoc(ShortString, "Vertex AI location, such as us-central1; default global.")),
    model: modelOverride,
  },
  "Google Vertex AI (generate-content on the project and location's publisher models).",
);

const REGION = Str({
  min: 1,
  max: 63,
  pattern: "^[a-z0-9-]+$",
  patternMessage: "must be lowercase letters, digits and '-'",
  default: "us-east-1",
});
const Guardrail = Obj({ identifier: ShortString, version: ShortString }, "Unset means no guardrail.");

export const ProviderG = Obj({ region: Opt(REGION), guardrail: Opt(Guardrail), model: modelOverride });
export const ProviderGModelSettings = Obj({ region: Opt(REGION), guardrail: Opt(Guardrail) });

export const CustomFormats = Arr(
  Obj({
    type: Enum(PROVIDER_FORMATS),
    path: Opt(UpstreamPath("Default: the default path of the format.")),
  }),
  {
    min: 1,
    max: 6,
    // The provider is asked in a format at that format's one path: a second entry of a type was never used.
    mapKeys: ["type"],
  },
);

const customBackendKind: Rule = rule({
  rule: "!has(self.backendRef) || !has(self.backendRef.kind) || self.backendRef.kind in ['Service', 'InferencePool']",
  message: "backendRef must be a Service or an InferencePool",
  fieldPath: ".backendRef",
  check: (s) => !has(s?.backendRef, "kind") || ["Service", "InferencePool"].includes(s.backendRef.kind),
});

// A Service is in the core group and an InferencePool in inference.networking.k8s.io; another group named nothing and
// was reported only in the routes' status (issue 22).
const customBackendGroup: Rule = rule({
  rule:
    "has(self.kind) && self.kind == 'InferencePool' ? " +
    "(has(self.group) && self.group == 'inference.networking.k8s.io') : " +
    "((has(self.kind) && self.kind != 'Service') || !has(self.group) || self.group == '')",
  message: "group must be empty for a Service and inference.networking.k8s.io for an InferencePool",
  fieldPath: ".group",
  check: (s) => {
    const kind = has(s, "kind") ? s.kind : "Service";
    const group = has(s, "group") ? s.group : "";
    if (kind === "InferencePool") return group === "inference.networking.k8s.io";
    return kind !== "Service" || group === "";
  },
});
const CustomBackendRef = Obj(LocalBackendObjectReference.properties, {
  description: "A Service (port required) or an InferencePool in the same namespace.",
  rules: [
    ...((LocalBackendObjectReference as unknown as Record<string, readonly Rule[]>)[RULES] ?? []),
    customBackendGroup,
  ],
});

export const CustomProvider = Obj(
  {
    backendRef: Opt(withDoc(CustomBackendRef, "A Service or InferencePool; when unset host and port are required.")),
    formats: CustomFormats,
    model: modelOverride,
  },
  { rules: [customBackendKind] },
);
export const CustomModelSettings = Obj(
  { backendRef: Opt(CustomBackendRef), formats: CustomFormats },
  { rules: [customBackendKind] },
);

const PROVIDER_VARIANTS = [
  "providerA",
  "providerB",
  "cloudC",
  "providerD",
  "providerE",
  "providerF",
  "providerG",
  "custom",
];

const llmProviderProps = {
  providerA: Opt(Obj({ model: modelOverride }, "The chat-completions family.")),
  providerB: Opt(ProviderB),
  cloudC: Opt(CloudCProvider),
  providerD: Opt(Obj({ model: modelOverride }, "The messages family.")),
  providerE: Opt(Obj({ model: modelOverride })),
  providerF: Opt(ProviderF),
  providerG: Opt(ProviderG),
  custom: Opt(CustomProvider),
  host: Opt(HostName("Target host; overrides the default of managed variants.")),
  port: Opt(PortNumber),
  path: Opt(UpstreamPath("Overrides the upstream API path; exclusive with pathPrefix.")),
  pathPrefix: Opt(UpstreamPath("Overrides the base path prefix (such as /v1); providerA and providerD only.")),
};

const llmProviderRules: Rule[] = [
  exactlyOne(PROVIDER_VARIANTS),
  atMostOne(
    ["path", "pathPrefix"],
    "at most one of path and pathPrefix may be set: path replaces the whole upstream path, pathPrefix its prefix",
  ),
  rule({
    rule: "!has(self.pathPrefix) || has(self.providerA) || has(self.providerD)",
    message: "pathPrefix is only supported for providerA and providerD",
    fieldPath: ".pathPrefix",
    check: (s) => !has(s, "pathPrefix") || has(s, "providerA") || has(s, "providerD"),
  }),
  rule({
    rule: "!has(self.custom) || has(self.custom.backendRef) || (has(self.host) && has(self.port))",
    message: "custom without backendRef requires host and port",
    fieldPath: ".custom",
    check: (s) => !has(s, "custom") || has(s.custom, "backendRef") || (has(s, "host") && has(s, "port")),
  }),
  // With a backendRef the port is the Service's (or the InferencePool's target port); this one would be ignored.
  rule({
    rule: "!has(self.port) || !has(self.custom) || !has(self.custom.backendRef)",
    message: "port is not used with custom.backendRef: the Service's port is backendRef.port",
    fieldPath: ".port",
    check: (s) => !has(s, "port") || !has(s?.custom, "backendRef"),
  }),
];

// The spec: prompt caching is for "cloud providers of variant providerG ... only"; Sluice writes its cache points in
// that provider's format alone, so elsewhere it would be accepted and do nothing.
const PROMPT_CACHING = "promptCaching applies only to providerG providers (Claude 3+ and Nova models)";

export const LLMProvider = Obj(llmProviderProps, { description: "An LLM provider.", rules: llmProviderRules });

export const NamedProvider = Obj(
  {
    name: withDoc(SectionName, "Unique across all groups; policies target it by sectionName."),
    ...llmProviderProps,
    policies: Opt(withDoc(BackendWithAI, "Win over GwPolicy and GwBackend policies for this provider.")),
  },
  {
    description: "An LLM provider with a name.",
    rules: [
      ...llmProviderRules,
      rule({
        rule: "!has(self.policies) || !has(self.policies.ai) || !has(self.policies.ai.promptCaching) || has(self.providerG)",
        message: PROMPT_CACHING,
        fieldPath: ".policies.ai.promptCaching",
        check: (s) => !has(s?.policies?.ai, "promptCaching") || has(s, "providerG"),
      }),
    ],
  },
);

export const AIBackend = Obj(
  {
    provider: Opt(LLMProvider),
    groups: Opt(
      Arr(Obj({ providers: Arr(NamedProvider, { min: 1, max: 16 }) }, "Providers of equal priority."), {
        min: 1,
        max: 8,
        description: "Priority groups, in priority order.",
      }),
    ),
  },
  {
    description: "LLM providers.",
    rules: [
      exactlyOne(["provider", "groups"]),
      rule({
        rule:
          "!has(self.groups) || self.groups.all(g, g.providers.all(p, " +
          "g.providers.exists_one(q, q.name == p.name) && self.groups.exists_one(h, h.providers.exists(q, q.name == p.name))))",
        message: "provider names must be unique across all groups",
        fieldPath: ".groups",
        check: (s) => {
          if (!Array.isArray(s?.groups)) return true;
          const seen = new Set<unknown>();
          for (const g of s.groups) {
            if (!Array.isArray(g?.providers)) continue;
            for (const p of g.providers) {
              if (seen.has(p?.name)) return false;
              seen.add(p?.name);
            }
          }
          return true;
        },
      }),
    ],
  },
);

const StaticMCPTarget = Obj(
  {
    host: Opt(HostName("The target's host.")),
    backendRef: Opt(withDoc(LocalObjectReference, "A Service in the same namespace; replaces host only.")),
    port: PortNumber,
    path: Opt(UpstreamPath("Default /sse for SSE, /mcp for StreamableHTTP.")),
    protocol: Opt(Enum(["StreamableHTTP", "SSE"])),
    policies: Opt(withDoc(BackendSimple, "Only for host-based targets.")),
  },
  {
    rules: [
      exactlyOne(["host", "backendRef"]),
      rule({
        rule: "!has(self.policies) || has(self.host)",
        message: "policies are only valid on host-based targets",
        fieldPath: ".policies",
        check: (s) => !has(s, "policies") || has(s, "host"),
      }),
    ],
  },
);

export const MCPBackend = Obj(
  {
    targets: Arr(
      Obj(
        {
          name: withDoc(SectionName, "Policies target it by sectionName."),
          selector: Opt(
            Obj({
              namespaces: Opt(withDoc(LabelSelector, "Unset searches only the backend's namespace.")),
              services: Opt(LabelSelector),
            }),
          ),
          static: Opt(StaticMCPTarget),
        },
        { rules: [exactlyOne(["selector", "static"])] },
      ),
      {
        min: 1,
        max: 32,
        rules: [
          rule({
            rule: "self.all(t, self.exists_one(u, u.name == t.name))",
            message: "target names must be unique",
            check: (s) => !Array.isArray(s) || new Set(s.map((t) => t?.name)).size === s.length,
          }),
        ],
      },
    ),
    sessionRouting: Opt(Enum(["Stateful", "Stateless"], { default: "Stateful" })),
    failureMode: Opt(Enum(["FailClosed", "FailOpen"], { default: "FailClosed" })),
    prefixMode: Opt(Enum(["Conditional", "Always", "Never"], { default: "Conditional" })),
  },
  "MCP targets multiplexed behind one endpoint.",
);

const VARIANTS = ["ai", "static", "dynamicForwardProxy", "mcp", "cloudA", "a2a"];

/** An agent runtime's ARN: partition, region, 12-digit account, runtime id (RE2 and ECMAScript alike). */
export const AGENT_RUNTIME_ARN_PATTERN =
  "^arn:aws(-[a-z]+)*:bedrock-agentcore:[a-z]{2}(-[a-z]+)+-[0-9]+:[0-9]{12}:runtime/[A-Za-z][A-Za-z0-9_-]{0,99}$";
/** An agent runtime endpoint name or version: it rides in the invocation's query string as is. */
export const AGENT_RUNTIME_QUALIFIER_PATTERN = "^[A-Za-z0-9_-]{1,64}$";

export const GwBackendSpec = Obj(
  {
    static: Opt(
      Obj(
        {
          host: Opt(HostName("Host name or IP address.")),
          port: Opt(PortNumber),
          unixPath: Opt(Str({ min: 1, max: 4096, description: "Unix socket; exclusive with host and port." })),
        },
        {
          rules: [
            rule({
              rule: "!has(self.unixPath) || (!has(self.host) && !has(self.port))",
              message: "unixPath is exclusive with host and port",
              fieldPath: ".unixPath",
              check: (s) => !has(s, "unixPath") || (!has(s, "host") && !has(s, "port")),
            }),
            rule({
              rule: "has(self.unixPath) || (has(self.host) && has(self.port))",
              message: "static needs host and port, or unixPath",
              check: (s) => has(s, "unixPath") || (has(s, "host") && has(s, "port")),
            }),
          ],
        },
      ),
    ),
    a2a: Opt(Obj({ host: HostName("Host name or IP address."), port: PortNumber }, "An agent-to-agent endpoint.")),
    dynamicForwardProxy: Opt(Empty("Send each request to the destination named by its Host header (or SNI).")),
    cloudA: Opt(
      Obj(
        {
          agentCore: Obj({
            agentRuntimeArn: Str({
              min: 1,
              max: 2048,
              pattern: AGENT_RUNTIME_ARN_PATTERN,
              patternMessage:
                "must be an agent runtime ARN: arn:aws:bedrock-agentcore:<region>:<12-digit account>:runtime/<runtime id>",
            }),
            qualifier: Opt(
              Str({
                min: 1,
                max: 64,
                pattern: AGENT_RUNTIME_QUALIFIER_PATTERN,
                patternMessage: "must be an endpoint name or version: letters, digits, _ or -",
                description: "Alias or version.",
              }),
            ),
          }),
        },
        "A cloud agent runtime.",
      ),
    ),
    mcp: Opt(MCPBackend),
    ai: Opt(AIBackend),
    policies: Opt(withDoc(BackendFull, "Win over GwPolicy resources for the same field.")),
  },
  {
    description: "Where traffic is sent.",
    rules: [
      exactlyOne(VARIANTS),
      rule({
        rule: "!has(self.policies) || !has(self.policies.ai) || has(self.ai)",
        message: "policies.ai is only valid on ai backends",
        fieldPath: ".policies.ai",
        check: (s) => !has(s?.policies, "ai") || has(s, "ai"),
      }),
      rule({
        rule: "!has(self.policies) || !has(self.policies.mcp) || has(self.mcp)",
        message: "policies.mcp is only valid on mcp backends",
        fieldPath: ".policies.mcp",
        check: (s) => !has(s?.policies, "mcp") || has(s, "mcp"),
      }),
      rule({
        rule:
          "!has(self.policies) || !has(self.policies.ai) || !has(self.policies.ai.promptCaching) || (has(self.ai) && " +
          "((has(self.ai.provider) && has(self.ai.provider.providerG)) || " +
          "(has(self.ai.groups) && self.ai.groups.exists(g, g.providers.exists(p, has(p.providerG))))))",
        message: `${PROMPT_CACHING}; this backend has none`,
        fieldPath: ".policies.ai.promptCaching",
        check: (s) =>
          !has(s?.policies?.ai, "promptCaching") ||
          has(s?.ai?.provider, "providerG") ||
          (Array.isArray(s?.ai?.groups) &&
            s.ai.groups.some(
              (g: { providers?: unknown }) =>
                Array.isArray(g?.providers) && g.providers.some((p: unknown) => has(p, "providerG")),
            )),
      }),
    ],
  },
);
export type GwBackendSpec = Static<typeof GwBackendSpec>;
