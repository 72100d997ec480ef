# shellcheck shell=bash
# Shared by build.sh, up.sh, down.sh and run.sh: where the Go toolchain and the
# built binaries are. Sourced, never run.
# shellcheck disable=SC2034 # the variables are for the scripts that source this

cluster_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo_dir=$(cd "$cluster_dir/../.." && pwd)

# crds_established SECS PATH: waits up to SECS seconds until every CRD in PATH (a file or
# folder of manifests) is Established, through the sourcing script's `k`. A loop rather than
# one `kubectl wait`: kubectl gives up at once, not at its timeout, when it reads a CRD whose
# status has no conditions yet, as one just created has until the API server writes them.
crds_established() {
  local end=$((SECONDS + $1))
  until k wait --for condition=established --timeout=5s -f "$2" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$end" ] || return 1
    sleep 1
  done
}

# Version of module $2 as pinned in the wrapper module $1 (its go.mod is the
# single source of truth, so bumping a version there moves the cache folder).
mod_version() {
  awk -v m="$2" '($1 == m || ($1 == "require" && $2 == m)) && $0 !~ /=>/ {
    v = ($1 == m) ? $2 : $3; print v; exit }' "$cluster_dir/$1/go.mod"
}

k8s_version=$(mod_version k8s k8s.io/kubernetes)
etcd_version=$(mod_version etcd go.etcd.io/etcd/server/v3)
kwok_version=$(mod_version kwok sigs.k8s.io/kwok)

# One folder per combination of pinned versions, outside the repository, so a
# clean clone on the same machine reuses it.
k8s_cache="${TEPHRA_K8S_CACHE:-$HOME/.cache/tephra-k8s}"
bin_dir="$k8s_cache/k8s-$k8s_version-etcd-$etcd_version-kwok-$kwok_version"

# The Go toolchain: PATH first, then the usual install folder. Empty when absent.
find_go() {
  if command -v go >/dev/null 2>&1; then
    command -v go
  elif [ -x /usr/local/go/bin/go ]; then
    echo /usr/local/go/bin/go
  fi
}

# need_go SCRIPT: for a build script, sets go_bin to the Go toolchain and asks for static
# binaries and never a toolchain download (the machine's Go must do); without Go, says so
# naming SCRIPT and exits 2.
need_go() {
  go_bin=$(find_go)
  if [ -z "$go_bin" ]; then
    echo "$1: no Go toolchain found (PATH, /usr/local/go/bin)" >&2
    exit 2
  fi
  export CGO_ENABLED=0 GOTOOLCHAIN=local
}

# kwok_node NAME: a Node that kwok plays (its annotation), of TEPHRA_NODE_CPU (8) cpu,
# TEPHRA_NODE_MEMORY (32Gi) and TEPHRA_NODE_PODS (110) pods, as a YAML document.
kwok_node() {
  cat <<NODE
apiVersion: v1
kind: Node
metadata:
  name: $1
  annotations: {kwok.x-k8s.io/node: fake, node.alpha.kubernetes.io/ttl: "0"}
  labels: {type: kwok, kubernetes.io/hostname: $1, kubernetes.io/os: linux, kubernetes.io/arch: amd64}
status:
  capacity: {cpu: "${TEPHRA_NODE_CPU:-8}", memory: ${TEPHRA_NODE_MEMORY:-32Gi}, pods: "${TEPHRA_NODE_PODS:-110}"}
  allocatable: {cpu: "${TEPHRA_NODE_CPU:-8}", memory: ${TEPHRA_NODE_MEMORY:-32Gi}, pods: "${TEPHRA_NODE_PODS:-110}"}
---
NODE
}
