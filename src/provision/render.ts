// A Gateway's data plane as Kubernetes objects, a pure function from the Gateway, its merged GwParameters and the
// controller's settings to the objects the Lease holder applies (provisioner.ts). Typed fields first, then the
// overlays (class level, then Gateway level) by strategic merge; every field it cannot apply is a problem naming it.

import { createHash } from "node:crypto";
import { isIP } from "node:net";
import type { Gateway } from "../api/gateway-api.js";
import { error, type Problem, warning } from "../api/problems.js";
import { namespaceOf } from "../api/resource.js";
import { gatewaySecretName } from "../sources/kube/xds-credentials.js";
import { type BootstrapSettings, renderProxyBootstrap } from "./bootstrap.js";
import {
  BOOTSTRAP_DIR,
  BOOTSTRAP_FILE,
  ENVOY_CONTAINER,
  proxyLabels,
  proxyName,
  SESSION_KEY_KEY,
  sessionKeySecretName,
  XDS_CERT_DIR,
} from "./names.js";
import type { EffectiveParameters, OverlayField, ParametersProblem, TypedParameters } from "./parameters.js";
import { type MergeProblem, strategicMerge } from "./strategic-merge.js";

export interface ProvisionSettings extends BootstrapSettings {
  /** The image when GwParameters names none: registry, repository and tag (the pinned Envoy version). */
  readonly image: { readonly registry: string; readonly repository: string; readonly tag: string };
  /** Envoy's log level when GwParameters sets none (default info). */
  readonly logLevel?: string;
}

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
export type ObjectJson = { [k: string]: Json };

export interface RenderedProxy {
  /** In the order they are applied: ServiceAccount, ConfigMap, workload, Service, PodDisruptionBudget, HPA. */
  readonly objects: readonly ObjectJson[];
  /** The session key Secret, without its data (a random key is made when it is first created, never again). */
  readonly sessionKeySecret: ObjectJson;
  /** Problems; with any error, the Gateway keeps its last good objects. */
  readonly problems: readonly ParametersProblem[];
}

/** Envoy's log levels (`--log-level`, `--component-log-level`). */
const LOG_LEVELS = new Set(["trace", "debug", "info", "warning", "warn", "error", "critical", "off"]);

/** Shutdown when GwParameters says nothing: drain for 10 s at least, 60 s at most. */
export const DEFAULT_SHUTDOWN = { min: 10, max: 60 } as const;

/** HPA bounds when the overlay gives none. */
const DEFAULT_HPA = { minReplicas: 1, maxReplicas: 3 } as const;

/**
 * `logging.level`: a default level and per-component levels, comma separated (`info`, `warn,upstream:debug`); a
 * component may also be written `upstream=debug`, the per-module filter form of the spec's existing implementation.
 * Returns the default, the components and the problems.
 */
export function parseLogLevel(level: string): { level: string; components: string[]; problems: Problem[] } {
  const problems: Problem[] = [];
  let def = "info";
  const components: string[] = [];
  for (const part of level.split(",").map((p) => p.trim())) {
    if (part === "") continue;
    const colon = part.search(/[:=]/);
    const lvl = colon < 0 ? part : part.slice(colon + 1);
    if (!LOG_LEVELS.has(lvl)) {
      problems.push(
        error("spec.logging.level", `"${part}": ${lvl} is not an Envoy log level (${[...LOG_LEVELS].join(", ")})`),
      );
      continue;
    }
    if (colon < 0) def = lvl;
    else if (!/^[a-z0-9_]+$/.test(part.slice(0, colon)))
      problems.push(
        error("spec.logging.level", `"${part}": a component is a name of Envoy's loggers (upstream, http, ...)`),
      );
    else components.push(`${part.slice(0, colon)}:${lvl}`);
  }
  return { level: def, components, problems };
}

function imageOf(typed: TypedParameters, settings: ProvisionSettings): string {
  const i = typed.image ?? {};
  const registry = i.registry ?? settings.image.registry;
  const repository = i.repository ?? settings.image.repository;
  const at = i.digest !== undefined ? `@${i.digest}` : `:${i.tag ?? settings.image.tag}`;
  return `${registry === "" ? "" : `${registry}/`}${repository}${at}`;
}

/**
 * The preStop hook: fail Envoy's health check (the readiness probe answers 503), start a graceful drain through its
 * admin endpoint (connections are told to close; listeners keep accepting for --drain-time-s, which is `max`, so past
 * the hook), wait at least `min` seconds, then until no request is in flight or `max` is near.
 * bash and its /dev/tcp (the official Envoy image is Ubuntu with bash): the image has no curl.
 */
export function preStopScript(adminPort: number, min: number, max: number): string {
  const admin = `/dev/tcp/127.0.0.1/${adminPort}`;
  const wait = Math.max(0, max - min - 2);
  return [
    // Fail the readiness check first (the pod leaves the Service's endpoints), then drain.
    ...["/healthcheck/fail", "/drain_listeners?graceful&skip_exit"].map(
      (path) =>
        `exec 3<>${admin} && printf 'POST ${path} HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\nContent-Length: 0\\r\\nConnection: close\\r\\n\\r\\n' >&3 && cat <&3 >/dev/null; exec 3<&-`,
    ),
    `sleep ${min}`,
    `end=$((SECONDS + ${wait}))`,
    "while [ $SECONDS -lt $end ]; do",
    `  exec 3<>${admin} || break`,
    "  printf 'GET /stats?filter=downstream_rq_active HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\nConnection: close\\r\\n\\r\\n' >&3",
    "  n=0",
    // biome-ignore lint/suspicious/noTemplateCurlyInString: bash parameter expansions, not a template.
    "  while IFS= read -r line <&3; do line=${line%$'\\r'}; case $line in http.admin.*|http.sluice_ready.*) ;; http.*.downstream_rq_active:*) n=$((n + ${line##*: })) ;; esac; done",
    "  exec 3<&-",
    "  [ $n -eq 0 ] && break",
    "  sleep 1",
    "done",
  ].join("\n");
}

function ownerReference(gateway: Gateway): Json {
  return {
    apiVersion: "gateway.networking.k8s.io/v1",
    kind: "Gateway",
    name: gateway.metadata.name,
    uid: gateway.metadata.uid ?? "",
    controller: true,
  };
}

function metadata(gateway: Gateway, name: string, labels: Record<string, string>): ObjectJson {
  return {
    name,
    namespace: namespaceOf(gateway),
    labels,
    ownerReferences: [ownerReference(gateway)],
  };
}

function servicePorts(gateway: Gateway): { port: number; protocol: "TCP" | "UDP" }[] {
  const seen = new Map<string, { port: number; protocol: "TCP" | "UDP" }>();
  for (const l of gateway.spec.listeners) {
    const protocol = l.protocol === "UDP" ? "UDP" : "TCP";
    seen.set(`${protocol}/${l.port}`, { port: l.port, protocol });
  }
  return [...seen.values()].sort((a, b) => a.port - b.port || (a.protocol < b.protocol ? -1 : 1));
}

/** The Gateway's objects. Pure: the same input gives the same objects, byte for byte. */
export function renderProxy(gateway: Gateway, params: EffectiveParameters, settings: ProvisionSettings): RenderedProxy {
  const problems: ParametersProblem[] = [...params.problems];
  const typed = params.typed;
  // A problem of a typed field belongs to the GwParameters that set it.
  const report = (p: Problem) => {
    const from = params.origin[p.path.split(".")[1] ?? ""];
    problems.push(from !== undefined ? { ...p, parameters: from } : p);
  };
  const ns = namespaceOf(gateway);
  const name = proxyName(gateway.metadata.name);
  const labels = proxyLabels(gateway.metadata.name);
  const selector = { ...labels };
  const kind = typed.workload?.kind ?? "Deployment";
  const withHpa = params.asked.has("horizontalPodAutoscaler");

  // Logging.
  const logging = parseLogLevel(typed.logging?.level ?? settings.logLevel ?? "info");
  for (const p of logging.problems) report(p);
  const jsonLogs = typed.logging?.format === "json";

  // The bootstrap.
  const bootstrap = renderProxyBootstrap({ namespace: ns, name: gateway.metadata.name }, settings, {
    jsonLogs,
    ...(typed.rawConfig !== undefined ? { rawConfig: typed.rawConfig as Record<string, unknown> } : {}),
  });
  const configHash = createHash("sha256").update(bootstrap).digest("hex").slice(0, 16);

  // Shutdown.
  const shutdown = typed.shutdown ?? DEFAULT_SHUTDOWN;

  // Mesh: Envoy alone cannot obtain workload certificates from a mesh CA.
  if (typed.mesh?.enabled === true)
    report(
      warning(
        "spec.mesh",
        "mTLS to mesh pods is not provisioned: Envoy needs workload certificates from the mesh CA (caAddress), which only a mesh agent (istio-agent, ztunnel) obtains and Sluice does not run one; trustDomain, additionalTrustDomains, clusterId and network have nothing to apply to; the proxy runs without mesh mTLS",
      ),
    );
  if (typed.modelCatalog !== undefined)
    report(
      warning(
        "spec.modelCatalog",
        "model cost catalogs are not read yet: Sluice's LLM cost accounting is the cost expression of Tokens rate-limit descriptors, which has no variable for catalog prices, and the spec defines no format for a catalog's entries; the ConfigMaps are neither read nor mounted",
      ),
    );

  // The container.
  const userEnv = typed.env ?? [];
  const userNames = new Set(userEnv.map((e) => e.name));
  const env: Json[] = [
    { name: "POD_NAME", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } },
    { name: "POD_NAMESPACE", valueFrom: { fieldRef: { fieldPath: "metadata.namespace" } } },
    { name: "CONNECTION_MIN_TERMINATION_DEADLINE", value: String(shutdown.min) },
    { name: "TERMINATION_GRACE_PERIOD_SECONDS", value: String(shutdown.max) },
    {
      name: "SESSION_KEY",
      valueFrom: { secretKeyRef: { name: sessionKeySecretName(gateway.metadata.name), key: SESSION_KEY_KEY } },
    },
  ].filter((e) => !userNames.has(e.name));
  for (const e of userEnv) {
    if (e.value !== undefined && e.valueFrom !== undefined)
      report(error("spec.env", `${e.name}: give value or valueFrom, not both`));
    env.push(e as Json);
  }
  const args = [
    "--config-path",
    `${BOOTSTRAP_DIR}/${BOOTSTRAP_FILE}`,
    "--service-node",
    "$(POD_NAME)",
    "--log-level",
    logging.level,
    ...(logging.components.length > 0 ? ["--component-log-level", logging.components.join(",")] : []),
    // How long a draining listener keeps its connections: on the preStop's drain, and on every listener update (a
    // changed filter chain drains the old one for this long, then closes its connections, requests in flight or not).
    // shutdown.max, the longest a request may take to finish; min is only the preStop's least wait. No hot restart,
    // so --parent-shutdown-time-s has nothing to time.
    "--drain-time-s",
    String(shutdown.max),
    "--drain-strategy",
    "immediate",
    "--disable-hot-restart",
  ];
  const ports = servicePorts(gateway);
  const container: ObjectJson = {
    name: ENVOY_CONTAINER,
    image: imageOf(typed, settings),
    ...(typed.image?.pullPolicy !== undefined ? { imagePullPolicy: typed.image.pullPolicy } : {}),
    command: ["envoy"],
    args,
    env,
    ports: [
      ...ports.map((p) => ({ containerPort: p.port, protocol: p.protocol })),
      { name: "ready", containerPort: settings.readyPort, protocol: "TCP" },
    ],
    readinessProbe: { httpGet: { path: "/ready", port: settings.readyPort }, periodSeconds: 5, failureThreshold: 1 },
    ...(typed.resources !== undefined ? { resources: typed.resources as Json } : {}),
    // The official image's user (its entrypoint, which `command` bypasses, would switch to it); nothing is written.
    securityContext: {
      runAsUser: 101,
      runAsGroup: 101,
      runAsNonRoot: true,
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ["ALL"] },
    },
    lifecycle: {
      preStop: { exec: { command: ["bash", "-c", preStopScript(settings.adminPort, shutdown.min, shutdown.max)] } },
    },
    volumeMounts: [
      { name: "bootstrap", mountPath: BOOTSTRAP_DIR, readOnly: true },
      ...(settings.tls ? [{ name: "xds-certificate", mountPath: XDS_CERT_DIR, readOnly: true }] : []),
    ],
  };
  const lowPorts = ports.some((p) => p.port < 1024);
  const podSpec: ObjectJson = {
    serviceAccountName: name,
    automountServiceAccountToken: false,
    terminationGracePeriodSeconds: shutdown.max,
    // Listeners below 1024 without root: a namespaced, safe sysctl.
    ...(lowPorts
      ? { securityContext: { sysctls: [{ name: "net.ipv4.ip_unprivileged_port_start", value: "0" }] } }
      : {}),
    containers: [container],
    volumes: [
      { name: "bootstrap", configMap: { name, items: [{ key: BOOTSTRAP_FILE, path: BOOTSTRAP_FILE }] } },
      ...(settings.tls
        ? [
            {
              name: "xds-certificate",
              secret: { secretName: gatewaySecretName(gateway.metadata.name), defaultMode: 0o444 },
            },
          ]
        : []),
    ],
  };
  const template: ObjectJson = {
    metadata: { labels, annotations: { "sluice.dev/bootstrap-hash": configHash } },
    spec: podSpec,
  };

  // The objects, typed fields only.
  const objects = new Map<OverlayField | "configMap", ObjectJson>();
  objects.set("serviceAccount", {
    apiVersion: "v1",
    kind: "ServiceAccount",
    metadata: metadata(gateway, name, labels),
  });
  objects.set("configMap", {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: metadata(gateway, name, labels),
    data: { [BOOTSTRAP_FILE]: bootstrap },
  });
  // The rollout strategies are the API server's defaults, written out so that they are Sluice's fields: an overlay
  // switching to Recreate (or OnDelete) with `$retainKeys: [type]` then drops rollingUpdate on apply, where a defaulted
  // rollingUpdate nobody owns would stay and make the object invalid.
  if (kind === "DaemonSet")
    objects.set("daemonSet", {
      apiVersion: "apps/v1",
      kind: "DaemonSet",
      metadata: metadata(gateway, name, labels),
      spec: {
        selector: { matchLabels: selector },
        template,
        updateStrategy: { type: "RollingUpdate", rollingUpdate: { maxUnavailable: 1, maxSurge: 0 } },
      },
    });
  else
    objects.set("deployment", {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: metadata(gateway, name, labels),
      // With an HPA, replicas is the HPA's field: never set here (an apply would fight it).
      spec: {
        ...(withHpa ? {} : { replicas: 1 }),
        selector: { matchLabels: selector },
        template,
        strategy: { type: "RollingUpdate", rollingUpdate: { maxUnavailable: "25%", maxSurge: "25%" } },
      },
    });
  objects.set("service", {
    apiVersion: "v1",
    kind: "Service",
    metadata: metadata(gateway, name, labels),
    spec: {
      type: "LoadBalancer",
      selector,
      ports: ports.map((p) => ({
        name: `${p.protocol.toLowerCase()}-${p.port}`,
        port: p.port,
        targetPort: p.port,
        protocol: p.protocol,
      })),
      ...serviceAddresses(gateway, (p) => problems.push(p)),
    },
  });
  if (params.asked.has("podDisruptionBudget"))
    objects.set("podDisruptionBudget", {
      apiVersion: "policy/v1",
      kind: "PodDisruptionBudget",
      metadata: metadata(gateway, name, labels),
      spec: { selector: { matchLabels: selector }, maxUnavailable: 1 },
    });
  if (withHpa) {
    if (kind !== "Deployment")
      report(
        error("spec.horizontalPodAutoscaler", "is only valid for Deployment workloads; workload.kind is DaemonSet"),
      );
    else
      objects.set("horizontalPodAutoscaler", {
        apiVersion: "autoscaling/v2",
        kind: "HorizontalPodAutoscaler",
        metadata: metadata(gateway, name, labels),
        spec: {
          scaleTargetRef: { apiVersion: "apps/v1", kind: "Deployment", name },
          ...DEFAULT_HPA,
          metrics: [
            { type: "Resource", resource: { name: "cpu", target: { type: "Utilization", averageUtilization: 80 } } },
          ],
        },
      });
  }
  if (kind === "DaemonSet" && params.asked.has("deployment"))
    report(warning("spec.deployment", "the workload is a DaemonSet: the deployment overlay is not used"));
  if (kind === "Deployment" && params.asked.has("daemonSet"))
    report(warning("spec.daemonSet", "the workload is a Deployment: the daemonSet overlay is not used"));

  // The overlays, class level then Gateway level.
  for (const step of params.overlays) {
    const target = objects.get(step.field);
    if (target === undefined) continue;
    const at = `spec.${step.field}`;
    const merged = applyOverlay(target, step.overlay, step.field, (m) =>
      problems.push({ ...error(`${at}.${m.path}`, m.message), parameters: step.from }),
    );
    objects.set(step.field, merged);
  }
  // What an overlay must not change: the names, the owner and the selector the Service and PDB rely on.
  for (const [, o] of objects) pinIdentity(o, gateway, name, selector, configHash);
  const sessionKeySecret: ObjectJson = {
    apiVersion: "v1",
    kind: "Secret",
    metadata: metadata(gateway, sessionKeySecretName(gateway.metadata.name), labels),
    type: "Opaque",
  };
  return { objects: [...objects.values()], sessionKeySecret, problems };
}

/** An overlay's metadata and spec merged onto a generated object. */
function applyOverlay(
  target: ObjectJson,
  overlay: NonNullable<TypedParameters["rawConfig"]> | { metadata?: unknown; spec?: unknown },
  field: OverlayField,
  report: (p: MergeProblem) => void,
): ObjectJson {
  const o = overlay as {
    metadata?: { labels?: Record<string, string>; annotations?: Record<string, string> };
    spec?: Json;
  };
  const out = structuredClone(target);
  const meta = out["metadata"] as ObjectJson;
  if (o.metadata?.labels !== undefined) meta["labels"] = { ...(meta["labels"] as ObjectJson), ...o.metadata.labels };
  if (o.metadata?.annotations !== undefined)
    meta["annotations"] = { ...((meta["annotations"] as ObjectJson | undefined) ?? {}), ...o.metadata.annotations };
  if (o.spec === undefined) return out;
  const problems: MergeProblem[] = [];
  // A ServiceAccount has no spec: its overlay's spec holds its top-level fields (automountServiceAccountToken, ...).
  if (field === "serviceAccount") {
    const { apiVersion, kind, metadata: m, ...rest } = out;
    const merged = strategicMerge(rest as Json, o.spec, problems, [], ["spec"]) as ObjectJson | undefined;
    for (const p of problems) report(p);
    return { apiVersion: apiVersion ?? "v1", kind: kind ?? "ServiceAccount", metadata: m ?? {}, ...(merged ?? {}) };
  }
  const merged = strategicMerge(out["spec"], o.spec, problems, [], ["spec"]);
  for (const p of problems) report(p);
  if (merged === undefined) delete out["spec"];
  else out["spec"] = merged;
  return out;
}

function pinIdentity(
  o: ObjectJson,
  gateway: Gateway,
  name: string,
  selector: Record<string, string>,
  configHash: string,
): void {
  const meta = o["metadata"] as ObjectJson;
  meta["name"] = o["kind"] === "Secret" ? (meta["name"] ?? name) : name;
  meta["namespace"] = namespaceOf(gateway);
  meta["ownerReferences"] = [ownerReference(gateway)];
  meta["labels"] = { ...(meta["labels"] as ObjectJson), ...selector };
  const spec = o["spec"] as ObjectJson | undefined;
  if (spec === undefined) return;
  if (o["kind"] === "Deployment" || o["kind"] === "DaemonSet") {
    spec["selector"] = { matchLabels: selector };
    const t = (spec["template"] ?? {}) as ObjectJson;
    const tm = (t["metadata"] ?? {}) as ObjectJson;
    tm["labels"] = { ...((tm["labels"] as ObjectJson | undefined) ?? {}), ...selector };
    // Pods roll when their bootstrap changes.
    tm["annotations"] = {
      ...((tm["annotations"] as ObjectJson | undefined) ?? {}),
      "sluice.dev/bootstrap-hash": configHash,
    };
    t["metadata"] = tm;
    spec["template"] = t;
  }
  if (o["kind"] === "Service") spec["selector"] = selector;
  if (o["kind"] === "PodDisruptionBudget") spec["selector"] = { matchLabels: selector };
  if (o["kind"] === "HorizontalPodAutoscaler")
    spec["scaleTargetRef"] = { apiVersion: "apps/v1", kind: "Deployment", name };
}

/**
 * spec.addresses: the first IP address becomes the load balancer's requested IP; others, and host names, cannot be
 * asked of a Service, and are reported.
 */
function serviceAddresses(gateway: Gateway, report: (p: Problem) => void): ObjectJson {
  const out: ObjectJson = {};
  (gateway.spec.addresses ?? []).forEach((a, i) => {
    const type = a.type ?? "IPAddress";
    if (type !== "IPAddress" || isIP(a.value) === 0) {
      report(
        warning(
          `gateway.spec.addresses[${i}]`,
          `${type} ${a.value}: only an IP address can be asked of the Gateway's LoadBalancer Service; not honoured`,
        ),
      );
      return;
    }
    if (out["loadBalancerIP"] !== undefined) {
      report(
        warning(
          `gateway.spec.addresses[${i}]`,
          `${a.value}: a Service asks for one load balancer IP; only ${String(out["loadBalancerIP"])} is honoured`,
        ),
      );
      return;
    }
    out["loadBalancerIP"] = a.value;
  });
  return out;
}
