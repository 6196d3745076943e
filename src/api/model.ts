// GwModel (Document 2): named models exposed by a gateway, mapped to a provider or to a virtual model.

import { ModelBackendAuth } from "./auth.js";
import { CloudCModelSettings, CustomModelSettings, ProviderFSettings, ProviderGModelSettings } from "./backend.js";
import { AIPromptGuard, BackendTLS, FieldTransformations, Health, Tunnel } from "./backend-policy.js";
import {
  Authorization,
  CELExpression,
  HeaderModifiers,
  LocalObjectReference,
  LongString,
  ParentReference,
} from "./common.js";
import { conditionalFallbackLast } from "./policy.js";
import {
  Arr,
  Enum,
  exactlyOne,
  has,
  Int,
  Obj,
  Opt,
  type Rule,
  rule,
  type Static,
  Str,
  type Obj as Value,
  withDoc,
} from "./schema-kit.js";

export const MODEL_PROVIDERS = [
  "Provider01",
  "Provider02",
  "Provider03",
  "Provider04",
  "Provider05",
  "Provider06",
  "Provider07",
  "Provider08",
  "Provider09",
  "Provider10",
  "Provider11",
  "Provider12",
  "Provider13",
  "Provider14",
  "Provider15",
  "Provider16",
  "Provider17",
  "Provider18",
  "Provider19",
  "Custom",
] as const;

export const ModelPolicies = Obj(
  {
    transformations: Opt(FieldTransformations("Body fields computed by CEL.")),
    authorization: Opt(withDoc(Authorization, "Rules clients must meet to use the model.")),
    auth: Opt(ModelBackendAuth),
    health: Opt(Health),
    tls: Opt(BackendTLS),
    tunnel: Opt(Tunnel),
    headers: Opt(HeaderModifiers),
    promptGuard: Opt(AIPromptGuard),
  },
  "Policies of the model.",
);

const modelRef = withDoc(LocalObjectReference, "A GwModel in the same namespace.");
const targetModel = Opt(withDoc(LongString, "Concrete model name; required when modelRef points to a wildcard match."));

export const VirtualModel = Obj(
  {
    weighted: Opt(
      Obj({
        targets: Arr(Obj({ modelRef, model: targetModel, weight: Opt(Int({ min: 0, max: 1000000, default: 1 })) }), {
          min: 1,
          max: 64,
        }),
      }),
    ),
    failover: Opt(
      Obj({
        targets: Arr(
          Obj({
            modelRef,
            model: targetModel,
            priority: Int({ min: 0, max: 1000000, description: "Lower is preferred." }),
          }),
          { min: 1, max: 64 },
        ),
      }),
    ),
    conditional: Opt(
      Obj({
        targets: Arr(
          Obj({
            modelRef,
            model: targetModel,
            when: Opt(withDoc(CELExpression, "The first true when wins; the last target may omit it (fallback).")),
          }),
          {
            min: 1,
            max: 64,
            rules: [
              {
                ...conditionalFallbackLast,
                rule: conditionalFallbackLast.rule.replaceAll("condition", "when"),
                message: "only one target may omit when, and it must be the last (the fallback)",
                check: (s) =>
                  conditionalFallbackLast.check(Array.isArray(s) ? s.map((e) => ({ condition: e?.when })) : s),
              },
            ],
          },
        ),
      }),
    ),
  },
  { description: "Routes among concrete models.", rules: [exactlyOne(["weighted", "failover", "conditional"])] },
);

function onlyWithProvider(field: string, provider: string): Rule {
  return rule({
    rule: `!has(self.${field}) || (has(self.provider) && self.provider == '${provider}')`,
    message: `${field} is only valid with provider ${provider}`,
    fieldPath: `.${field}`,
    check: (s) => !has(s, field) || s.provider === provider,
  });
}

// A GwModel attaches to Gateways (and their listeners, a ListenerSet's among them) only, as the translator reads
// parentRefs: another kind or group matched nothing, and the status said "not a Gateway served by Sluice" (issue 22).
const ModelParentReference = Obj(
  {
    ...ParentReference.properties,
    group: Opt(
      Enum(["gateway.networking.k8s.io"], {
        default: "gateway.networking.k8s.io",
        description: "The Gateway's group.",
      }),
    ),
    kind: Opt(
      Enum(["Gateway"], {
        default: "Gateway",
        description: "Gateway: a GwModel attaches to a Gateway, or to one of its listeners by sectionName or port.",
      }),
    ),
  },
  "A Gateway (or a listener of one, by sectionName or port) the model attaches to.",
);

/** `provider` = `value` needs `needs` in the spec (CEL and predicate), with why. */
function providerNeeds(
  value: string,
  o: { cel: string; check: (s: Value) => boolean; fieldPath: string; message: string },
): Rule {
  return rule({
    rule: `!has(self.provider) || self.provider != '${value}' || (${o.cel})`,
    message: o.message,
    fieldPath: o.fieldPath,
    check: (s) => s?.provider !== value || o.check(s),
  });
}

export const GwModelSpec = Obj(
  {
    parentRefs: Arr(ModelParentReference, { min: 1, max: 16, description: "Gateways and listeners it attaches to." }),
    match: Opt(
      Obj(
        {
          model: Opt(
            Str({
              min: 1,
              max: 1024,
              pattern: "^(\\*|[^*]+|\\*[^*]+|[^*]+\\*)$",
              patternMessage:
                "must be an exact name, one * as the last character (gpt-*), one * as the first (*-latest), or *",
              description: "Exact name, gpt-*, *-latest or *.",
            }),
          ),
        },
        "Which requested model names this matches; omitted means metadata.name exactly.",
      ),
    ),
    visibility: Opt(
      Enum(["Public", "Internal"], { default: "Public", description: "Internal: selectable only by virtual models." }),
    ),
    provider: Opt(Enum(MODEL_PROVIDERS)),
    cloudC: Opt(CloudCModelSettings),
    providerF: Opt(ProviderFSettings),
    providerG: Opt(ProviderGModelSettings),
    custom: Opt(CustomModelSettings),
    baseURL: Opt(
      Str({
        min: 1,
        max: 1024,
        pattern: "^https?://[^/?#@\\s]+(/[^?#\\s]*)?$",
        patternMessage: "must be an http or https URL with no query, fragment or user info",
        description: "Overrides the provider address and base path prefix.",
      }),
    ),
    policies: Opt(ModelPolicies),
    virtualModel: Opt(VirtualModel),
  },
  {
    description: "A model exposed to clients of a gateway.",
    rules: [
      exactlyOne(["provider", "virtualModel"]),
      onlyWithProvider("cloudC", "Provider02"),
      onlyWithProvider("providerF", "Provider05"),
      onlyWithProvider("providerG", "Provider06"),
      onlyWithProvider("custom", "Custom"),
      // What each provider family cannot be reached without (the translator refused these in status only).
      providerNeeds("Provider02", {
        cel: "has(self.cloudC)",
        check: (s) => has(s, "cloudC"),
        fieldPath: ".cloudC",
        message: "provider Provider02 requires cloudC: its resourceName and resourceType form the host",
      }),
      providerNeeds("Provider05", {
        cel: "has(self.providerF)",
        check: (s) => has(s, "providerF"),
        fieldPath: ".providerF",
        message: "provider Provider05 requires providerF: its projectId is part of every request path",
      }),
      providerNeeds("Provider08", {
        cel: "has(self.baseURL)",
        check: (s) => has(s, "baseURL"),
        fieldPath: ".baseURL",
        message: "provider Provider08 requires baseURL: it has no public address, so write where it runs",
      }),
      providerNeeds("Custom", {
        cel: "has(self.custom)",
        check: (s) => has(s, "custom"),
        fieldPath: ".custom",
        message: "provider Custom requires custom: the formats it speaks",
      }),
      providerNeeds("Custom", {
        cel: "!has(self.custom) || has(self.custom.backendRef) || has(self.baseURL)",
        check: (s) => !has(s, "custom") || has(s.custom, "backendRef") || has(s, "baseURL"),
        fieldPath: ".baseURL",
        message: "provider Custom without custom.backendRef requires baseURL: where the provider runs",
      }),
      rule({
        rule: "!has(self.baseURL) || has(self.provider)",
        message: "baseURL is only valid with provider",
        fieldPath: ".baseURL",
        check: (s) => !has(s, "baseURL") || has(s, "provider"),
      }),
    ],
  },
);
export type GwModelSpec = Static<typeof GwModelSpec>;
