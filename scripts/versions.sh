# Pinned versions of what setup installs. Change here only.
NODE_VERSION=22.23.3
ENVOY_VERSION=1.40.0

# Kubernetes control plane for the tests, built from the Go module proxy by scripts/kube-setup.sh. Must match the
# k8s.io/kubernetes and go.etcd.io/etcd/server/v3 versions pinned in tools/kube/go.mod (setup checks).
KUBE_VERSION=1.36.3
ETCD_VERSION=3.6.8
# helm for the install chart's tests (deploy/helm/sluice), built from the Go module helm.sh/helm/v3 (tools/helm/go.mod
# pins the same version; setup checks).
HELM_VERSION=3.22.0
# Go for that build when the machine has none as recent (the golang.org/toolchain module, checked against its go.sum
# hash from sum.golang.org).
GO_VERSION=1.26.8
GO_TOOLCHAIN_SUM=h1:ZOmGe1OnfREDMIdb1Qi4G9JSuDPBLGExZMQ4nis1RXM=

# Gateway API CRDs (Go module sigs.k8s.io/gateway-api, config/crd/{standard,experimental}). No release has both
# ListenerSet in the standard channel and XListenerSet in the experimental one: v1.4.x ships only XListenerSet
# (gateway.networking.x-k8s.io, experimental), v1.5.0 promoted it to ListenerSet (gateway.networking.k8s.io, standard
# and experimental) and dropped XListenerSet. We pin the latest release, v1.7.0, for every kind, and take the
# XListenerSet CRD alone from v1.4.1 (its own group, so it sits beside v1.7.0's CRDs) since Sluice accepts both kinds.
GATEWAY_API_VERSION=1.7.0
GATEWAY_API_XLISTENERSET_VERSION=1.4.1
# InferencePool (inference.networking.k8s.io/v1) from sigs.k8s.io/gateway-api-inference-extension. v1.6.0: the proxy
# refuses v1.6.1's zip (403), so v1.6.0 is the latest it serves.
INFERENCE_EXTENSION_VERSION=1.6.0
# A second Node.js for the tests of what only a newer runtime serves (test/unit/mcp-keepalive-probes.test.ts: Node.js
# 26 sets TCP keepalive's probe interval and count), from the same npm registry package; scripts/setup.d/node-next.sh.
NODE_NEXT_VERSION=26.12.1
