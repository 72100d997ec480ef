#!/usr/bin/env bash
# Builds the batch frameworks' operators that tephra is tested with, from their published Go
# modules (the wrapper modules beside this script, versions pinned in their go.mod/go.sum),
# into ${TEPHRA_FRAMEWORKS_CACHE:-$HOME/.cache/tephra-frameworks}/<operator>-<version>/, only
# when missing, with the operator's CRDs copied beside the binary. Prints the folder of each
# operator on its own line: `ray DIR`.
#
#   ray  KubeRay's ray-operator (github.com/ray-project/kuberay/ray-operator)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/cluster/lib.sh
. "$here/../cluster/lib.sh"

need_go frameworks/build.sh
cache="${TEPHRA_FRAMEWORKS_CACHE:-$HOME/.cache/tephra-frameworks}"

# build NAME MODULE: the operator's main package is the module's root.
build() {
  local name=$1 module=$2 version dir tmp start src
  version=$(awk -v m="$module" '$1 == m { print $2; exit }' "$here/$name/go.mod")
  [ -n "$version" ] || { echo "frameworks/build.sh: $module not pinned in $name/go.mod" >&2; exit 1; }
  dir="$cache/$name-$version"
  if [ ! -x "$dir/operator" ]; then
    mkdir -p "$cache"
    tmp=$(mktemp -d "$cache/.build.XXXXXX")
    start=$(date +%s)
    echo "frameworks/build.sh: building $module $version ..." >&2
    (cd "$here/$name" && "$go_bin" build -trimpath -ldflags "-s -w" -o "$tmp/operator" "$module")
    src=$(cd "$here/$name" && "$go_bin" list -m -f '{{.Dir}}' "$module")
    mkdir -p "$tmp/crds"
    cp "$src"/config/crd/bases/*.yaml "$tmp/crds/"
    rm -rf "$dir"
    mv "$tmp" "$dir"
    echo "frameworks/build.sh: built $name in $(( $(date +%s) - start )) s" >&2
  fi
  echo "$name $dir"
}

build ray github.com/ray-project/kuberay/ray-operator
