#!/usr/bin/env bash
# The product's core with kubectl as the user's tool: `tephra serve --embedded` (webhooks,
# scheduler, Job controller, kubelet and kube-scheduler stand-ins), then
# `kubectl apply -f tests/data/manifests/vcjob-run.yaml` runs to Completed: the gang's three
# pods start, the master finishes, `TaskCompleted → CompleteJob` stops the workers. Then a
# second job is aborted and resumed with Commands written by kubectl (what `vcctl job
# suspend/resume` make).
#
# Environment:
#   TEPHRA_BIN  the tephra binary (default: built with cargo from this checkout)
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
command -v kubectl >/dev/null || { echo "kubectl not installed; skipping"; exit 0; }
if [ -z "${TEPHRA_BIN:-}" ]; then
  (cd "$ROOT" && cargo build -q --bin tephra)
  TEPHRA_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/debug/tephra"
fi

PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo $((20000 + RANDOM % 20000)))"
WORK="$(mktemp -d)"
LOG="$WORK/serve.log"
"$TEPHRA_BIN" serve --embedded --embedded-api-listen "127.0.0.1:$PORT" \
  --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 >"$LOG" 2>&1 &
SERVER=$!
cleanup() { kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

K=(kubectl --server "http://127.0.0.1:$PORT" --kubeconfig /dev/null --request-timeout=10s)
PASSED=0
ok() { PASSED=$((PASSED + 1)); echo "ok - $*"; }
fail() { echo "kubectl job: $PASSED passed, 1 failed"; echo "FAIL: $*" >&2; echo "--- serve log" >&2; tail -n 40 "$LOG" >&2; exit 1; }
expect() { [ "$2" = "$3" ] || fail "$1: got '$2', want '$3'"; ok "$1"; }
# wait_phase JOB PHASE SECONDS
wait_phase() {
  "${K[@]}" wait --for=jsonpath='{.status.state.phase}'="$2" "vcjob/$1" --timeout="${3}s" >/dev/null \
    || fail "vcjob/$1 did not reach $2 in ${3}s (it is '$("${K[@]}" get vcjob "$1" -o jsonpath='{.status.state.phase}')')"
}

for _ in $(seq 1 300); do
  "${K[@]}" get queue root >/dev/null 2>&1 && break
  kill -0 "$SERVER" 2>/dev/null || fail "tephra serve exited"
  sleep 0.1
done
"${K[@]}" get queue root >/dev/null 2>&1 || fail "tephra serve --embedded not ready"
ok "serve --embedded up on port $PORT"

"${K[@]}" apply -f "$ROOT/tests/data/manifests/vcjob-run.yaml" >/dev/null || fail "apply the vcJob"
wait_phase hello-gang Running 60
expect "three pods, one gang" "$("${K[@]}" get pods -l volcano.sh/job-name=hello-gang -o name | wc -l | tr -d ' ')" "3"
wait_phase hello-gang Completed 60
ok "vcjob/hello-gang Completed"
expect "the master succeeded" "$("${K[@]}" get vcjob hello-gang -o jsonpath='{.status.succeeded}')" "1"
expect "why it completed" "$("${K[@]}" get vcjob hello-gang -o jsonpath='{.status.state.reason}')" "TaskCompleted"
for _ in $(seq 1 100); do
  [ "$("${K[@]}" get pods -l volcano.sh/job-name=hello-gang,volcano.sh/task-spec=worker -o name | wc -l | tr -d ' ')" = "0" ] && break
  sleep 0.1
done
expect "the workers were stopped" "$("${K[@]}" get pods -l volcano.sh/job-name=hello-gang,volcano.sh/task-spec=worker -o name | wc -l | tr -d ' ')" "0"

# Abort and resume by Command, as vcctl writes them.
sed 's/name: hello-gang/name: pausable/; s/simulation.tephra.io\/run-seconds: "2"/simulation.tephra.io\/run-seconds: "3600"/' \
  "$ROOT/tests/data/manifests/vcjob-run.yaml" | "${K[@]}" apply -f - >/dev/null || fail "apply the second vcJob"
wait_phase pausable Running 60
UID_="$("${K[@]}" get vcjob pausable -o jsonpath='{.metadata.uid}')"
command() { # command ACTION
  printf 'apiVersion: bus.volcano.sh/v1alpha1\nkind: Command\nmetadata:\n  generateName: pausable-\naction: %s\ntarget:\n  apiVersion: batch.volcano.sh/v1alpha1\n  kind: Job\n  name: pausable\n  uid: %s\n' "$1" "$UID_" \
    | "${K[@]}" create -f - >/dev/null || fail "create Command $1"
}
command AbortJob
wait_phase pausable Aborted 60
ok "AbortJob by Command"
command ResumeJob
wait_phase pausable Running 60
expect "the resumed job counts its retry" "$("${K[@]}" get vcjob pausable -o jsonpath='{.status.retryCount}')" "1"
expect "Commands are deleted once executed" "$("${K[@]}" get commands -o name | wc -l | tr -d ' ')" "0"

echo "kubectl job: $PASSED passed"
