# Pinned versions of what setup installs. Change here only.
NODE_VERSION=22.23.3
ENVOY_VERSION=1.40.0
