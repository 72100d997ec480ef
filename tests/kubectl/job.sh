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
# shellcheck source=tests/kubectl/lib.sh
. "$(dirname "$0")/lib.sh"
SUITE="kubectl job"

need_kubectl
TEPHRA_BIN="${TEPHRA_BIN:-$(built_tephra)}"
tephra_work
serve_embedded

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
