// GwParameters (Document 2): how the data plane is provisioned for a gateway.

import { ObjectName } from "./common.js";
import {
  Arr,
  atMostOne,
  Bool,
  Enum,
  has,
  Int,
  JsonObject,
  MapOf,
  Obj,
  Opt,
  rule,
  type Static,
  Str,
  withDoc,
} from "./schema-kit.js";

const LOG_PART = "([a-z0-9_]+[:=])?(trace|debug|info|warning|warn|error|critical|off)";

const Overlay = Obj(
  {
    metadata: Opt(
      Obj({
        labels: Opt(MapOf(Str({ max: 63 }))),
        annotations: Opt(MapOf(Str())),
      }),
    ),
    spec: Opt(JsonObject("Merged with strategic merge patch semantics ($patch: delete / replace supported).")),
  },
  "Overrides on a generated object.",
);

const SECONDS = Int({ min: 0, max: 31536000 });

export const GwParametersSpec = Obj(
  {
    workload: Opt(Obj({ kind: Opt(Enum(["Deployment", "DaemonSet"], { default: "Deployment" })) })),
    logging: Opt(
      Obj({
        level: Opt(
          Str({
            min: 1,
            max: 1024,
            default: "info",
            // Envoy's levels, as the provisioner passes them to --log-level and --component-log-level
            // (src/provision/render.ts); Envoy would not start with another.
            pattern: `^\\s*(${LOG_PART})?\\s*(,\\s*(${LOG_PART})?\\s*)*$`,
            patternMessage:
              "must be an Envoy log level (trace, debug, info, warning, warn, error, critical, off) and component:level " +
              "(or component=level) entries, comma separated, such as warn,upstream:debug",
            description: "Per-module filter string.",
          }),
        ),
        format: Opt(Enum(["json", "text"], { default: "text" })),
      }),
    ),
    rawConfig: Opt(JsonObject("Merged into the generated proxy config; typed fields win.")),
    image: Opt(
      Obj({
        registry: Opt(Str({ min: 1, max: 253 })),
        repository: Opt(Str({ min: 1, max: 256 })),
        // The grammar of an image reference's tag and digest (OCI distribution): anything else made an image name the
        // kubelet refuses (ErrInvalidImageName) only once the pod starts.
        tag: Opt(
          Str({
            min: 1,
            max: 128,
            pattern: "^[A-Za-z0-9_][A-Za-z0-9_.-]*$",
            patternMessage: "must be an image tag: letters, digits, _, . and -, not starting with . or -",
          }),
        ),
        digest: Opt(
          Str({
            min: 1,
            max: 128,
            pattern: "^[a-z0-9]+([+._-][a-z0-9]+)*:[a-zA-Z0-9=_-]+$",
            patternMessage: "must be an image digest <algorithm>:<encoded>, such as sha256:<64 hex digits>",
          }),
        ),
        pullPolicy: Opt(Enum(["Always", "IfNotPresent", "Never"], { description: "Default left to the cluster." })),
      }),
    ),
    env: Opt(
      Arr(
        Obj(
          {
            name: Str({ min: 1, max: 256 }),
            value: Opt(Str()),
            valueFrom: Opt(JsonObject("A Kubernetes EnvVarSource.")),
          },
          // Kubernetes refuses both on a container, so the workload would fail to be created (issue 22).
          { rules: [atMostOne(["value", "valueFrom"])] },
        ),
        "Environment variables; SESSION_KEY overrides the controller-managed session key.",
      ),
    ),
    resources: Opt(JsonObject("Container resource requirements (limits, requests).")),
    shutdown: Opt(
      Obj(
        {
          min: withDoc(SECONDS, "Seconds; CONNECTION_MIN_TERMINATION_DEADLINE."),
          max: withDoc(SECONDS, "Seconds; TERMINATION_GRACE_PERIOD_SECONDS."),
        },
        {
          rules: [
            rule({
              rule: "self.min <= self.max",
              message: "min must not be above max",
              fieldPath: ".min",
              check: (s) => typeof s?.min !== "number" || typeof s?.max !== "number" || s.min <= s.max,
            }),
          ],
        },
      ),
    ),
    mesh: Opt(
      Obj({
        enabled: Opt(Bool()),
        caAddress: Opt(withDoc(Str({ min: 1, max: 1024 }), "Default: the in-cluster mesh CA address.")),
        trustDomain: Opt(withDoc(Str({ min: 1, max: 253 }), "Default cluster.local or the control plane's.")),
        additionalTrustDomains: Opt(Arr(Str({ min: 1, max: 253 }))),
        clusterId: Opt(Str({ min: 1, max: 253, default: "Kubernetes" })),
        network: Opt(Str({ max: 253 })),
      }),
    ),
    modelCatalog: Opt(
      Obj(
        {
          sources: Opt(
            Arr(
              Obj({
                configMap: Obj({
                  name: ObjectName,
                  key: Opt(Str({ min: 1, max: 253, default: "catalog.json" })),
                }),
              }),
            ),
          ),
        },
        "Model cost catalogs; only on Gateway-level parameters.",
      ),
    ),
    deployment: Opt(Overlay),
    daemonSet: Opt(Overlay),
    service: Opt(Overlay),
    serviceAccount: Opt(Overlay),
    podDisruptionBudget: Opt(withDoc(Overlay, "Absent: none is created.")),
    horizontalPodAutoscaler: Opt(withDoc(Overlay, "Deployment-backed proxies only.")),
  },
  {
    description: "Data plane provisioning for a gateway.",
    rules: [
      rule({
        rule: "!has(self.horizontalPodAutoscaler) || !has(self.workload) || !has(self.workload.kind) || self.workload.kind == 'Deployment'",
        message: "horizontalPodAutoscaler is only valid for Deployment workloads",
        fieldPath: ".horizontalPodAutoscaler",
        check: (s) => !has(s, "horizontalPodAutoscaler") || (s?.workload?.kind ?? "Deployment") === "Deployment",
      }),
    ],
  },
);
export type GwParametersSpec = Static<typeof GwParametersSpec>;
