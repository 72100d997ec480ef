#!/usr/bin/env bash
# Builds helm from its published Go module (helm.sh/helm/v3) into
# ${TEPHRA_TOOLS_CACHE:-$HOME/.cache/tephra-tools}/helm-<version>/helm, only
# when that binary is missing, and prints the binary's path on its last line.
# The first build takes several minutes (216 s on 2 busy cores); later runs are instant.
# Progress goes to stderr, so `$(build-tools.sh)` is the path alone.
set -euo pipefail

helm_version=v3.22.0
tools_cache="${TEPHRA_TOOLS_CACHE:-$HOME/.cache/tephra-tools}"
helm_dir="$tools_cache/helm-$helm_version"
helm_bin="$helm_dir/helm"

if [ ! -x "$helm_bin" ]; then
  go_bin=
  if command -v go >/dev/null 2>&1; then go_bin=$(command -v go)
  elif [ -x /usr/local/go/bin/go ]; then go_bin=/usr/local/go/bin/go; fi
  if [ -z "$go_bin" ]; then
    echo "build-tools.sh: no Go toolchain found (PATH, /usr/local/go/bin)" >&2
    exit 2
  fi
  mkdir -p "$helm_dir"
  tmp=$(mktemp -d "$helm_dir/.build.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  start=$(date +%s)
  echo "build-tools.sh: building helm $helm_version ..." >&2
  # Static binary, the machine's toolchain only; helm reports its version from
  # these linker flags (otherwise `helm version` says v3.x-dev).
  CGO_ENABLED=0 GOTOOLCHAIN=local GOBIN="$tmp" nice "$go_bin" install -trimpath \
    -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$helm_version" \
    "helm.sh/helm/v3/cmd/helm@$helm_version"
  mv "$tmp/helm" "$helm_bin"
  echo "build-tools.sh: built helm in $(( $(date +%s) - start )) s" >&2
fi
echo "$helm_bin"
