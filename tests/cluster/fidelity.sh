#!/usr/bin/env bash
# tephra's embedded API against the real kube-apiserver, as kubectl shows them: runs
# tests/kubectl/fidelity.sh (headers of `kubectl get` per built-in kind, `kubectl explain`, the
# 422 message of an invalid vcJob, a `kind: List` file, an unknown kind) once against a real
# control plane started with up.sh and once against `tephra apiserver`, and fails on any
# difference between the two transcripts. Prints SKIPPED (and succeeds) on a machine without
# the built control plane (tests/cluster/build.sh needs Go).
#
# Environment:
#   TEPHRA_BIN   the tephra binary (default: cargo build of this checkout)
set -euo pipefail
# shellcheck source=tests/cluster/lib.sh
. "$(dirname "$0")/lib.sh"

if [ ! -x "$bin_dir/kube-apiserver" ]; then
  echo "SKIPPED: tests/cluster/fidelity.sh: no kube-apiserver in $bin_dir (run tests/cluster/build.sh, which needs Go)"
  exit 0
fi
command -v kubectl >/dev/null || { echo "SKIPPED: tests/cluster/fidelity.sh: kubectl not installed"; exit 0; }
if [ -z "${TEPHRA_BIN:-}" ]; then
  (cd "$repo_dir" && cargo build -q --bin tephra)
  TEPHRA_BIN="${CARGO_TARGET_DIR:-$repo_dir/target}/debug/tephra"
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/tephra-fidelity.XXXXXX")
cluster_up=0
cleanup() {
  local rc=$?
  if [ "$cluster_up" = 1 ]; then "$cluster_dir/down.sh" "$work/cluster" >/dev/null 2>&1 || true; fi
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT

TEPHRA_CLUSTER_DIR="$work/cluster" "$cluster_dir/up.sh" 1 >"$work/up.log" 2>&1 || {
  cat "$work/up.log" >&2
  echo "FAIL: tests/cluster/fidelity.sh: the control plane did not start" >&2
  exit 1
}
cluster_up=1

FIDELITY_KUBECONFIG="$work/cluster/kubeconfig" FIDELITY_TRANSCRIPT="$work/kube.txt" \
  "$repo_dir/tests/kubectl/fidelity.sh" >"$work/kube.log" 2>&1 || {
  cat "$work/kube.log" >&2
  echo "FAIL: tests/kubectl/fidelity.sh against kube-apiserver" >&2
  exit 1
}
TEPHRA_APISERVER="$TEPHRA_BIN apiserver" FIDELITY_TRANSCRIPT="$work/tephra.txt" \
  "$repo_dir/tests/kubectl/fidelity.sh" >"$work/tephra.log" 2>&1 || {
  cat "$work/tephra.log" >&2
  echo "FAIL: tests/kubectl/fidelity.sh against tephra apiserver" >&2
  exit 1
}
if ! diff -u --label kube-apiserver --label tephra "$work/kube.txt" "$work/tephra.txt"; then
  echo "FAIL: kubectl shows tephra's embedded API differently from kube-apiserver (diff above)" >&2
  exit 1
fi
echo "kubectl fidelity: $(wc -l <"$work/kube.txt") checks identical against kube-apiserver and tephra"
