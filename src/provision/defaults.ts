// What a provisioned Envoy gets when neither GwParameters nor the controller's flags say otherwise.

/** The Envoy version Sluice is built and tested against (scripts/versions.sh ENVOY_VERSION; a unit test checks). */
export const ENVOY_VERSION = "1.40.0";

/** The official Envoy image of that version. */
export const DEFAULT_ENVOY_IMAGE = {
  registry: "docker.io",
  repository: "envoyproxy/envoy",
  tag: `v${ENVOY_VERSION}`,
} as const;

/** Envoy's admin listener in the pod (loopback only; the preStop hook drains through it). */
export const DEFAULT_ENVOY_ADMIN_PORT = 19000;
/** The readiness listener the kubelet probes (`/ready`). */
export const DEFAULT_ENVOY_READY_PORT = 19003;
/** The controller's xDS Service, in the controller's namespace, as the chart names it. */
export const DEFAULT_XDS_SERVICE = "sluice-xds";
