#!/usr/bin/env bash
# Builds deploy/Containerfile on a machine that cannot pull its base image and cannot start containers under crun
# (the test machine: no route to docker.io; crun is refused setrlimit), then runs `sluice --help` in the image.
#
# - The base: a stand-in for node:22-bookworm-slim assembled from this machine's Node (the project's .cache/node, or
#   the node on PATH), npm, dash as /bin/sh, their shared libraries and the CA bundle (plus $NODE_EXTRA_CA_CERTS, for a
#   TLS-intercepting proxy in front of the npm registry). It is not the image users get; the Containerfile is.
# - The build: buildah with --isolation chroot, from a `git archive HEAD` of the checkout (committed files only), the
#   npm cache mounted so npm ci reuses it.
# - The run: buildah run --isolation chroot, as the image's user.
#
# Usage: deploy/build-image-offline.sh [tag]      (needs buildah and podman: apt-get install buildah podman)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tag="${1:-localhost/sluice:offline}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

node_bin="$root/.cache/node/bin/node"
[ -x "$node_bin" ] || node_bin="$(command -v node)"
npm_dir="$(dirname "$(readlink -f "$(command -v npm)")")/.."

rootfs="$work/rootfs"
mkdir -p "$rootfs"/{usr/local/bin,usr/local/lib/node_modules,usr/bin,bin,etc/ssl/certs,tmp,root}
cp "$node_bin" "$rootfs/usr/local/bin/node"
cp -a "$(readlink -f "$npm_dir")" "$rootfs/usr/local/lib/node_modules/npm"
ln -s ../lib/node_modules/npm/bin/npm-cli.js "$rootfs/usr/local/bin/npm"
ln -s ../lib/node_modules/npm/bin/npx-cli.js "$rootfs/usr/local/bin/npx"
cp /bin/dash "$rootfs/bin/sh"
cp /usr/bin/env "$rootfs/usr/bin/env"
for lib in $( (ldd "$node_bin"; ldd /bin/dash; ldd /usr/bin/env) | grep -o '/[^ ]*' | sort -u); do
  mkdir -p "$rootfs$(dirname "$lib")"
  cp -L "$lib" "$rootfs$lib"
done
cat /etc/ssl/certs/ca-certificates.crt ${NODE_EXTRA_CA_CERTS:+"$NODE_EXTRA_CA_CERTS"} >"$rootfs/etc/ssl/certs/ca-certificates.crt"
printf 'root:x:0:0:root:/root:/bin/sh\nnonroot:x:65532:65532::/tmp:/bin/sh\n' >"$rootfs/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$rootfs/etc/group"
chmod 1777 "$rootfs/tmp"
tar -C "$rootfs" -cf "$work/base.tar" .
base="localhost/sluice-node-base:offline"
podman import --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' \
  --change 'ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt' "$work/base.tar" "$base" >/dev/null

mkdir "$work/context"
git -C "$root" archive HEAD | tar -x -C "$work/context"
mkdir -p "$HOME/.npm"
buildah bud --isolation chroot --volume "$HOME/.npm:/root/.npm" --build-arg "NODE_IMAGE=$base" \
  -f "$work/context/deploy/Containerfile" -t "$tag" "$work/context"

container="$(buildah from "$tag")"
trap 'buildah rm "$container" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
# The image's ENTRYPOINT and CMD (node /app/bin/sluice.js --help), as the image's USER.
buildah run --isolation chroot --user 65532:65532 "$container" -- node /app/bin/sluice.js --help
