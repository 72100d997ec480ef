#!/usr/bin/env bash
# Builds etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok
# from their published Go modules (the wrapper modules beside this script) into
# ${TEPHRA_K8S_CACHE:-$HOME/.cache/tephra-k8s}/<versions>/, building only the
# binaries that are missing and printing what it builds and how long it took.
# Prints the folder on its last line.
set -euo pipefail
# shellcheck source=tests/cluster/lib.sh
. "$(dirname "$0")/lib.sh"

need_go build.sh
# The control plane reports this version (kubectl and kwok read it); without
# the flags it would claim v0.0.0-master.
k8s_ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  minor=${k8s_version#v1.}
  k8s_ldflags="$k8s_ldflags -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=${minor%%.*}"
done

mkdir -p "$bin_dir"
built_any=0

# build MODULE_DIR PACKAGE:BINARY... — one `go build` per module, so packages
# shared by the three Kubernetes binaries are compiled once.
build() {
  local mod=$1 pkgs=() names=() want name pkg
  shift
  for want in "$@"; do
    pkg=${want%%:*} name=${want##*:}
    if [ ! -x "$bin_dir/$name" ]; then
      pkgs+=("$pkg") names+=("$name")
    fi
  done
  [ "${#pkgs[@]}" -gt 0 ] || return 0
  local tmp start
  tmp=$(mktemp -d "$bin_dir/.build.XXXXXX")
  start=$(date +%s)
  echo "build.sh: building ${names[*]} (module tests/cluster/$mod) ..."
  (cd "$cluster_dir/$mod" && "$go_bin" build -trimpath -ldflags "$ldflags" -o "$tmp/" "${pkgs[@]}")
  # go build -o DIR/ names each binary after its package path's last element
  # that is not a major-version suffix (go.etcd.io/etcd/server/v3 -> server).
  for want in "$@"; do
    pkg=${want%%:*} name=${want##*:}
    local base=${pkg##*/}
    case $base in v[0-9]*) base=${pkg%/*} base=${base##*/} ;; esac
    if [ -e "$tmp/$base" ]; then mv "$tmp/$base" "$bin_dir/$name"; fi
  done
  rm -rf "$tmp"
  echo "build.sh: built ${names[*]} in $(( $(date +%s) - start )) s"
  built_any=1
}

ldflags="-s -w"
build etcd go.etcd.io/etcd/server/v3:etcd
ldflags=$k8s_ldflags
build k8s k8s.io/kubernetes/cmd/kube-apiserver:kube-apiserver \
  k8s.io/kubernetes/cmd/kube-controller-manager:kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler:kube-scheduler
build kwok sigs.k8s.io/kwok/cmd/kwok:kwok

[ "$built_any" -eq 1 ] || echo "build.sh: all binaries present, nothing to build"
echo "$bin_dir"
