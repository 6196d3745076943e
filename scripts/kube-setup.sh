#!/usr/bin/env bash
# Sets up the Kubernetes control plane the tests start (test/helpers/kube.ts), idempotently:
#   - kube-apiserver, kube-controller-manager (the garbage collector of the provisioning tests) and etcd, built from
#     tools/kube (a Go module pinning them) into .cache/kube-$KUBE_VERSION/; skipped when the binaries there report the
#     pinned versions. A cold build is about 6 min on 2 cores for the first two, 2 min more for the controller manager;
#   - helm, built from tools/helm (the Go module helm.sh/helm/v3) into .cache/helm-$HELM_VERSION/; about 4 min of CPU
#     on 2 cores, once (the chart tests run helm lint and helm template);
#   - Go for that build, from the module proxy's golang.org/toolchain into .cache/go, only when the machine's is older;
#   - the Gateway API CRDs (standard and experimental channels), XListenerSet, and InferencePool, from their Go modules
#     into .cache/crds/.
# Every result is written under a temporary name and renamed into place, so an interrupted run never leaves half a
# binary or half a directory of CRDs; a lock keeps two setups running at once from building twice.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
# shellcheck source=scripts/versions.sh
source scripts/versions.sh
mkdir -p .cache

kube_dir=".cache/kube-$KUBE_VERSION"
crd_dir=".cache/crds"
gateway_dir="$crd_dir/gateway-api-v$GATEWAY_API_VERSION"
xlistenerset_dir="$crd_dir/gateway-api-v$GATEWAY_API_XLISTENERSET_VERSION"
inference_dir="$crd_dir/inference-extension-v$INFERENCE_EXTENSION_VERSION"

helm_dir=".cache/helm-$HELM_VERSION"

# (grep reads to the end, not -q: with pipefail, a -q that stops at the first line can kill the writer of the next with
# SIGPIPE, and the check fails though the version is right; etcd prints four lines.)
apiserver_ok() {
  "$kube_dir/kube-apiserver" --version 2>/dev/null | grep -x "Kubernetes v$KUBE_VERSION" >/dev/null &&
    "$kube_dir/etcd" --version 2>/dev/null | grep -x "etcd Version: $ETCD_VERSION" >/dev/null
}
kcm_ok() { "$kube_dir/kube-controller-manager" --version 2>/dev/null | grep -x "Kubernetes v$KUBE_VERSION" >/dev/null; }
kube_ok() { apiserver_ok && kcm_ok; }
crds_ok() { [ -d "$gateway_dir" ] && [ -d "$xlistenerset_dir" ] && [ -d "$inference_dir" ]; }
helm_ok() { [ "$("$helm_dir/helm" version --template '{{.Version}}' 2>/dev/null)" = "v$HELM_VERSION" ]; }

if kube_ok && crds_ok && helm_ok; then exit 0; fi

exec 9>.cache/kube-setup.lock
flock 9 # another setup may be building: wait for it, then find its result
if kube_ok && crds_ok && helm_ok; then exit 0; fi

for pin in "k8s.io/kubernetes v$KUBE_VERSION" "go.etcd.io/etcd/server/v3 v$ETCD_VERSION"; do
  if ! grep -Eq "(^|[[:space:]])$pin( |$)" tools/kube/go.mod; then
    echo "setup: tools/kube/go.mod does not pin $pin (scripts/versions.sh): make them agree" >&2
    exit 1
  fi
done

if ! grep -Eq "(^|[[:space:]])helm.sh/helm/v3 v$HELM_VERSION( |$)" tools/helm/go.mod; then
  echo "setup: tools/helm/go.mod does not pin helm.sh/helm/v3 v$HELM_VERSION (scripts/versions.sh): make them agree" >&2
  exit 1
fi

# A Go at least as recent as tools/kube/go.mod asks for: $GO, PATH, /usr/local/go, else the pinned toolchain.
go_need="$(sed -n 's/^go \([0-9.]*\)$/\1/p' tools/kube/go.mod)"
go_recent() {
  local v
  v="$("$1" env GOVERSION 2>/dev/null)" || return 1
  v="${v#go}"
  [ "$(printf '%s\n%s\n' "$go_need" "$v" | sort -V | head -n1)" = "$go_need" ]
}
go=""
for candidate in "${GO:-}" "$(command -v go || true)" /usr/local/go/bin/go "$root/.cache/go/bin/go"; do
  if [ -n "$candidate" ] && [ -x "$candidate" ] && go_recent "$candidate"; then
    go="$candidate"
    break
  fi
done
proxy="${GOPROXY:-https://proxy.golang.org}"
proxy="${proxy%%[,|]*}"
if [ -z "$go" ]; then
  echo "setup: installing Go $GO_VERSION from the Go module proxy (golang.org/toolchain) into .cache/go"
  rm -rf .cache/go.tmp
  python3 - "$proxy/golang.org/toolchain/@v/v0.0.1-go$GO_VERSION.linux-amd64.zip" "$GO_TOOLCHAIN_SUM" .cache/go.tmp <<'PY'
import base64, hashlib, io, os, sys, urllib.request, zipfile
url, want, dest = sys.argv[1:]
data = urllib.request.urlopen(url, timeout=600).read()
z = zipfile.ZipFile(io.BytesIO(data))
names = sorted(n for n in z.namelist() if not n.endswith("/"))
# go.sum's h1: SHA-256 over the sorted "sha256hex  name" lines of the module's files.
summary = "".join(f"{hashlib.sha256(z.read(n)).hexdigest()}  {n}\n" for n in names)
got = "h1:" + base64.b64encode(hashlib.sha256(summary.encode()).digest()).decode()
if got != want:
    sys.exit(f"setup: {url}: checksum {got}, expected {want}")
for n in names:
    rel = n.split("/", 2)[2]  # golang.org/toolchain@v0.0.1-goX.linux-amd64/<rel>
    path = os.path.join(dest, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(z.read(n))
    if rel.startswith("bin/") or rel.startswith("pkg/tool/"):
        os.chmod(path, 0o755)
PY
  rm -rf .cache/go && mv .cache/go.tmp .cache/go
  go="$root/.cache/go/bin/go"
fi

if ! kube_ok; then
  # What is missing or of another version: the API server and etcd go together, the controller manager alone.
  targets=()
  apiserver_ok || targets+=(k8s.io/kubernetes/cmd/kube-apiserver ./etcd)
  kcm_ok || targets+=(k8s.io/kubernetes/cmd/kube-controller-manager)
  echo "setup: building ${targets[*]} (tools/kube, Kubernetes v$KUBE_VERSION, etcd $ETCD_VERSION, $("$go" env GOVERSION)) into $kube_dir; about 6 min on 2 cores for all, once"
  tmp="$(mktemp -d "$root/.cache/kube-build.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  # One invocation, so they compile and link in parallel. -X sets the version the Kubernetes binaries report (else
  # v0.0.0, which clients refuse to compare); etcd has its version compiled in.
  (cd tools/kube && GOTOOLCHAIN=local "$go" build -trimpath -buildvcs=false \
    -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=v$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=${KUBE_VERSION%%.*} -X k8s.io/component-base/version.gitMinor=$(echo "$KUBE_VERSION" | cut -d. -f2)" \
    -o "$tmp/" "${targets[@]}")
  mkdir -p "$kube_dir"
  for bin in etcd kube-apiserver kube-controller-manager; do
    if [ -f "$tmp/$bin" ]; then mv -f "$tmp/$bin" "$kube_dir/$bin"; fi
  done
  if ! kube_ok; then
    echo "setup: the binaries built in $kube_dir do not report v$KUBE_VERSION / $ETCD_VERSION" >&2
    exit 1
  fi
fi

if ! helm_ok; then
  echo "setup: building helm v$HELM_VERSION (tools/helm, $("$go" env GOVERSION)) into $helm_dir; about 4 min of CPU, once"
  tmp_helm="$(mktemp -d "$root/.cache/helm-build.XXXXXX")"
  trap 'rm -rf "$tmp_helm" "${tmp:-}"' EXIT
  # helm reports the version -X sets (else its own default, which is not the release's).
  (cd tools/helm && GOTOOLCHAIN=local "$go" build -trimpath -buildvcs=false \
    -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=v$HELM_VERSION" -o "$tmp_helm/" helm.sh/helm/v3/cmd/helm)
  mkdir -p "$helm_dir"
  mv -f "$tmp_helm/helm" "$helm_dir/helm"
  if ! helm_ok; then
    echo "setup: the helm built in $helm_dir does not report v$HELM_VERSION" >&2
    exit 1
  fi
fi

# The verified zip of a Go module version (go.sum hash checked against sum.golang.org by `go mod download`). The zip
# is what we read: `go mod download` still fetches and verifies a module whose go.mod wants a newer Go (gateway-api
# v1.7.0 asks for 1.27), it only declines to report the directory.
module_zip() {
  local out
  out="$(cd "$tmp_crds" && GOTOOLCHAIN=local GOFLAGS=-mod=mod "$go" mod download -json "$1@v$2" || true)"
  python3 -c '
import json, sys
d = json.loads(sys.argv[1])
if not d.get("Zip") or not d.get("Sum"):
    sys.exit("setup: go mod download %s@%s: %s" % (d.get("Path"), d.get("Version"), d.get("Error", "no zip")))
print(d["Zip"])' "$out"
}

# Copies the CustomResourceDefinition files of a module zip matching a glob (relative to the module root) into a dir.
extract_crds() {
  python3 - "$1" "$2" "$3" <<'PY'
import fnmatch, os, sys, zipfile
zip_path, pattern, dest = sys.argv[1:]
os.makedirs(dest, exist_ok=True)
n = 0
with zipfile.ZipFile(zip_path) as z:
    for name in sorted(z.namelist()):
        rel = name.split("/", 2)[2]  # <host>/<path>@<version>/<rel>
        if not fnmatch.fnmatch(rel, pattern):
            continue
        text = z.read(name).decode()
        if "\nkind: CustomResourceDefinition\n" not in "\n" + text:
            continue  # kustomizations, admission policies
        with open(os.path.join(dest, os.path.basename(rel)), "w") as f:
            f.write(text)
        n += 1
if n == 0:
    sys.exit(f"setup: no CRD matches {pattern} in {zip_path}")
PY
}

if ! crds_ok; then
  echo "setup: Gateway API v$GATEWAY_API_VERSION CRDs (+ XListenerSet v$GATEWAY_API_XLISTENERSET_VERSION), InferencePool v$INFERENCE_EXTENSION_VERSION into $crd_dir"
  tmp_crds="$(mktemp -d "$root/.cache/crds-fetch.XXXXXX")"
  trap 'rm -rf "$tmp_crds" "${tmp:-}" "${tmp_helm:-}"' EXIT
  mkdir -p "$crd_dir"
  if [ ! -d "$gateway_dir" ]; then
    zip="$(module_zip sigs.k8s.io/gateway-api "$GATEWAY_API_VERSION")"
    extract_crds "$zip" "config/crd/standard/*.yaml" "$tmp_crds/gw/standard"
    extract_crds "$zip" "config/crd/experimental/*.yaml" "$tmp_crds/gw/experimental"
    mv "$tmp_crds/gw" "$gateway_dir"
  fi
  if [ ! -d "$xlistenerset_dir" ]; then
    zip="$(module_zip sigs.k8s.io/gateway-api "$GATEWAY_API_XLISTENERSET_VERSION")"
    extract_crds "$zip" "config/crd/experimental/gateway.networking.x-k8s.io_xlistenersets.yaml" "$tmp_crds/xls/experimental"
    mv "$tmp_crds/xls" "$xlistenerset_dir"
  fi
  if [ ! -d "$inference_dir" ]; then
    zip="$(module_zip sigs.k8s.io/gateway-api-inference-extension "$INFERENCE_EXTENSION_VERSION")"
    extract_crds "$zip" "config/crd/bases/inference.networking.k8s.io_inferencepools.yaml" "$tmp_crds/inf"
    mv "$tmp_crds/inf" "$inference_dir"
  fi
fi
