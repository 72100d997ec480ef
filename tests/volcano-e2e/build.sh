#!/usr/bin/env bash
# Builds, only when missing, what tests/volcano-e2e/run.sh needs from the
# published volcano.sh/volcano module (pinned in go.mod beside this script):
#   the test binaries of Volcano's e2e suites (go test -c): jobp, jobseq,
#     schedulingbase, schedulingaction, vcctl, admission, cronjob, hypernode, stress;
#   vcctl, the suites' VC_BIN;
#   Volcano's vc-scheduler, vc-controller-manager and vc-webhook-manager, the
#     baseline that the suites also run against.
# into a folder beside the control plane's binaries (tests/cluster/build.sh):
# ${TEPHRA_K8S_CACHE:-$HOME/.cache/tephra-k8s}/volcano-<version>/.
# Prints what it builds and how long it took, and the folder on its last line.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/volcano-e2e/lib.sh
. "$here/lib.sh"

need_go build.sh
mkdir -p "$vc_dir"
built_any=0

# Volcano's binaries: one `go build` so shared packages compile once.
pkgs=() names=()
for want in cli:vcctl scheduler:vc-scheduler controller-manager:vc-controller-manager \
  webhook-manager:vc-webhook-manager; do
  if [ ! -x "$vc_dir/${want##*:}" ]; then
    pkgs+=("volcano.sh/volcano/cmd/${want%%:*}") names+=("$want")
  fi
done
if [ "${#pkgs[@]}" -gt 0 ]; then
  tmp=$(mktemp -d "$vc_dir/.build.XXXXXX")
  start=$(date +%s)
  echo "build.sh: building ${names[*]##*:} ..."
  (cd "$here" && "$go_bin" build -trimpath -ldflags "-s -w" -o "$tmp/" "${pkgs[@]}")
  for want in "${names[@]}"; do mv "$tmp/${want%%:*}" "$vc_dir/${want##*:}"; done
  rm -rf "$tmp"
  echo "build.sh: built ${names[*]##*:} in $(($(date +%s) - start)) s"
  built_any=1
fi

# The suites: `go test -c -o DIR/` names each binary PACKAGE.test.
pkgs=() names=()
for suite in "${vc_suites[@]}"; do
  if [ ! -x "$vc_dir/$suite.test" ]; then
    pkgs+=("volcano.sh/volcano/test/e2e/$suite") names+=("$suite.test")
  fi
done
if [ "${#pkgs[@]}" -gt 0 ]; then
  tmp=$(mktemp -d "$vc_dir/.build.XXXXXX")
  start=$(date +%s)
  echo "build.sh: building ${names[*]} ..."
  (cd "$here" && "$go_bin" test -c -trimpath -ldflags "-s -w" -o "$tmp/" "${pkgs[@]}")
  for name in "${names[@]}"; do mv "$tmp/$name" "$vc_dir/$name"; done
  rm -rf "$tmp"
  echo "build.sh: built ${names[*]} in $(($(date +%s) - start)) s"
  built_any=1
fi

[ "$built_any" -eq 1 ] || echo "build.sh: all binaries present, nothing to build"
echo "$vc_dir"
