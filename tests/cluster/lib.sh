# shellcheck shell=bash
# Shared by build.sh, up.sh, down.sh and run.sh: where the Go toolchain and the
# built binaries are. Sourced, never run.
# shellcheck disable=SC2034 # the variables are for the scripts that source this

cluster_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo_dir=$(cd "$cluster_dir/../.." && pwd)

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
