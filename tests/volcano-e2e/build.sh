#!/usr/bin/env bash
# Builds, only when missing, what tests/volcano-e2e/run.sh needs from the
# published volcano.sh/volcano module (pinned in go.mod beside this script):
#   the test binaries of Volcano's e2e suites (go test -c): jobp, jobseq,
#     schedulingbase, schedulingaction, vcctl, admission, cronjob, hypernode, stress, dra;
#   vcctl, the suites' VC_BIN;
#   Volcano's vc-scheduler, vc-controller-manager and vc-webhook-manager, the
#     baseline that the suites also run against.
#
# Usage: build.sh [--for tephra|volcano] [SUITE...]
#   SUITE        build only these suites' test binaries (default: every suite)
#   --for tephra leave Volcano's three components out (a run against tephra needs only
#                vcctl and the suites); --for volcano (the default) builds them too
# into a folder beside the control plane's binaries (tests/cluster/build.sh):
# ${TEPHRA_K8S_CACHE:-$HOME/.cache/tephra-k8s}/volcano-<version>/.
# Prints what it builds and how long it took, and the folder on its last line.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/volcano-e2e/lib.sh
. "$here/lib.sh"

for_target=volcano
suites=()
while [ $# -gt 0 ]; do
  case $1 in
    --for) for_target=${2:-}; shift 2 ;;
    --for=*) for_target=${1#--for=}; shift ;;
    -*) echo "build.sh: unknown option $1" >&2; exit 2 ;;
    *) suites+=("$1"); shift ;;
  esac
done
case $for_target in tephra | volcano) ;; *) echo "build.sh: --for must be tephra or volcano" >&2; exit 2 ;; esac
[ "${#suites[@]}" -gt 0 ] || suites=("${vc_suites[@]}")
vc_check_suites build.sh "${suites[@]}"

need_go build.sh
mkdir -p "$vc_dir"
built_any=0

# Volcano's binaries: one `go build` so shared packages compile once.
wanted=(cli:vcctl)
if [ "$for_target" = volcano ]; then
  wanted+=(scheduler:vc-scheduler controller-manager:vc-controller-manager webhook-manager:vc-webhook-manager)
fi
pkgs=() names=()
for want in "${wanted[@]}"; do
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
for suite in "${suites[@]}"; do
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
