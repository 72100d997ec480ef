#!/usr/bin/env bash
# `tephra job|queue|pg` (the vcctl-style command line) against `tephra serve --embedded`, with
# the exact output of every table form checked (ages and generated names normalised):
# job run/list (-q, -S, -N)/view/view --watch/abort/resume/restart/delete, queue
# create/list/get/close/open/operate/delete (refused until Closed), pg list, -A, -o wide|json|yaml, and the one-line errors
# (unknown job or queue, no cluster) with exit code 1, --kubeconfig/KUBECONFIG with the context's namespace, `run -f -`.
# kubectl checks what the commands did, and that `kubectl describe`
# of a vcJob and of its PodGroup says why the job waits.
#
# Environment:
#   TEPHRA_BIN  the tephra binary (default: built with cargo from this checkout)
set -euo pipefail
# shellcheck source=tests/kubectl/lib.sh
. "$(dirname "$0")/lib.sh"
SUITE="vcctl"

need_kubectl
TEPHRA_BIN="${TEPHRA_BIN:-$(built_tephra)}"
tephra_work
serve_embedded

T=("$TEPHRA_BIN")
export TEPHRA_SERVER="http://127.0.0.1:$PORT"
# Ages (the last column of the default tables) and generated name suffixes vary run to run.
norm() { sed -E 's/  [0-9]+[smhd]([0-9]+[smhd])?$/  AGE/; s/-[a-z0-9]{5}\)$/-XXXXX)/; s/-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}   /-UID   /'; }
# Where column widths depend on other rows: spaces collapsed, the columns still checked.
squeeze() { sed -E 's/ +/ /g; s/ [0-9]+[smhd]([0-9]+[smhd])? / AGE /'; }
# run_fails DESCRIPTION WANTED_STDERR COMMAND...: exit code 1 and exactly this one line.
run_fails() {
  local what="$1" want="$2"; shift 2
  local rc=0 err
  err="$("$@" 2>&1 >/dev/null)" || rc=$?
  [ "$rc" = 1 ] || fail "$what: exit code $rc, want 1 (stderr: $err)"
  expect "$what" "$err" "$want"
}
wait_queue() { # wait_queue QUEUE STATE
  "${K[@]}" wait --for=jsonpath='{.status.state}'="$2" "queue/$1" --timeout=30s >/dev/null \
    || fail "queue/$1 did not become $2"
}

# Errors: one line, exit 1.
run_fails "no cluster" "tephra: error: cannot reach the cluster at http://127.0.0.1:1/: client error (Connect): tcp connect error: Connection refused (os error 111)" \
  "${T[@]}" job list --server 127.0.0.1:1
run_fails "unknown job" 'tephra: error: job "nope" not found in namespace "default"' "${T[@]}" job view nope
run_fails "abort an unknown job" 'tephra: error: job "nope" not found in namespace "team"' "${T[@]}" job abort nope -n team
run_fails "unknown queue" 'tephra: error: queue "nope" not found' "${T[@]}" queue close nope
run_fails "a file of something else" "tephra: error: $ROOT/manifests/namespace.yaml: document 1 is \"Namespace\" of \"v1\", not a Job of \"batch.volcano.sh/v1alpha1\" (use kubectl apply for other objects)" \
  "${T[@]}" job run -f "$ROOT/manifests/namespace.yaml"
OUT="$("${T[@]}" job list 2>&1)" || fail "job list on an empty namespace"
expect "nothing to list" "$OUT" "No resources found in default namespace."

# A kubeconfig works as for kubectl, its context's namespace the default; `-f -` reads stdin.
cat >"$WORK/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: embedded, cluster: {server: "http://127.0.0.1:$PORT"}}]
users: [{name: nobody, user: {}}]
contexts: [{name: team, context: {cluster: embedded, user: nobody, namespace: team}}]
current-context: team
EOF
"${K[@]}" create namespace team >/dev/null || fail "create namespace team"
OUT="$(env -u TEPHRA_SERVER "${T[@]}" job list --kubeconfig "$WORK/kubeconfig" 2>&1)" || fail "job list --kubeconfig: $OUT"
expect "job list --kubeconfig: the context's namespace" "$OUT" "No resources found in team namespace."
sed 's/name: hello-gang/name: from-stdin/' "$ROOT/tests/data/manifests/vcjob-run.yaml" \
  | env -u TEPHRA_SERVER KUBECONFIG="$WORK/kubeconfig" "${T[@]}" job run -f - >"$WORK/out" 2>&1 \
  || fail "job run -f - with KUBECONFIG: $(cat "$WORK/out")"
expect "job run -f - with KUBECONFIG" "$(cat "$WORK/out")" "job.batch.volcano.sh/from-stdin created"
expect "created in the context's namespace" "$("${K[@]}" get vcjob -n team -o name)" "job.batch.volcano.sh/from-stdin"
"${T[@]}" job delete from-stdin -n team >/dev/null || fail "job delete -n team"

# A job that runs to Completed, followed live.
expect "job run" "$("${T[@]}" job run -f "$ROOT/tests/data/manifests/vcjob-run.yaml")" "job.batch.volcano.sh/hello-gang created"
WATCH="$("${T[@]}" job view hello-gang --watch --timeout 60s)" || fail "job view --watch did not end well: $WATCH"
expect "watch header" "$(echo "$WATCH" | head -n 1)" "PHASE       PENDING  RUNNING  SUCCEEDED  FAILED  TASKS"
expect "watch ends Completed" "$(echo "$WATCH" | tail -n 1)" "Completed   0        0        1          0       master 1 Succeeded; worker 0"
echo "$WATCH" | grep -q '^Running     0        3        0          0       master 1 Running; worker 2 Running$' \
  || fail "the watch never showed the gang running: $WATCH"
ok "job view --watch followed the job to Completed"
expect "job list" "$("${T[@]}" job list | norm)" "NAME         PHASE       MIN   PENDING   RUNNING   SUCCEEDED   FAILED   RETRIES   AGE
hello-gang   Completed   3     0         0         1           0        0         AGE"
# vcctl's filters and spelling: -q/--queue, -S/--scheduler, -N for the namespace.
expect "job list -q default -N default" "$("${T[@]}" job list -q default -N default | norm | tail -n 1)" \
  "hello-gang   Completed   3     0         0         1           0        0         AGE"
expect "job list --queue other" "$("${T[@]}" job list --queue other 2>&1)" "No resources found in default namespace."
expect "job list -S other-scheduler" "$("${T[@]}" job list -S other-scheduler 2>&1)" "No resources found in default namespace."
expect "pg list -q other" "$("${T[@]}" pg list -q other 2>&1)" "No resources found in default namespace."
VIEW="$("${T[@]}" job view hello-gang)"
for line in "Name:          hello-gang" "Phase:         Completed" "Reason:        TaskCompleted" "Min Available: 3" \
  "  master   1          0         0         1           0"; do
  echo "$VIEW" | grep -qxF -- "$line" || fail "job view lacks '$line': $VIEW"
done
ok "job view"

# A long job: abort, resume, restart, delete, each through a Command.
sed 's/name: hello-gang/name: pausable/; s/simulation.tephra.io\/run-seconds: "2"/simulation.tephra.io\/run-seconds: "3600"/' \
  "$ROOT/tests/data/manifests/vcjob-run.yaml" >"$WORK/pausable.yaml"
"${T[@]}" job run -f "$WORK/pausable.yaml" >/dev/null || fail "job run pausable"
wait_phase pausable Running 60
# The PodGroup's status follows its pods (phase Running, 3 running), not stuck at Inqueue.
for _ in $(seq 1 100); do
  "${T[@]}" pg list | grep -qE '^pausable-[0-9a-f-]+ +Running +3 +3 ' && break
  sleep 0.1
done
"${T[@]}" pg list | grep -qE '^pausable-[0-9a-f-]+ +Running +3 +3 ' || fail "PodGroup status stuck: $("${T[@]}" pg list -o wide)"
ok "pg list: the running gang's PodGroup is Running with 3 running"
run_fails "watch timeout" 'tephra: error: job "pausable" is still Running after 1s (--timeout)' \
  "${T[@]}" job view pausable -w --timeout 1s
expect "job abort" "$("${T[@]}" job abort pausable | norm)" "job.batch.volcano.sh/pausable: AbortJob requested (command.bus.volcano.sh/pausable-abortjob-XXXXX)"
WATCH="$("${T[@]}" job view pausable -w --timeout 60s)" || fail "watch until Aborted: $WATCH"
expect "watch ends Aborted" "$(echo "$WATCH" | tail -n 1)" "Aborted     0        0        0          0       master 0; worker 0"
DESCRIBE="$("${K[@]}" describe vcjob pausable)"
echo "$DESCRIBE" | grep -qE "Normal +CommandIssued .*Start to execute command AbortJob" || fail "describe vcjob: no CommandIssued: $DESCRIBE"
echo "$DESCRIBE" | grep -qE "Normal +Aborted .*Aborting -> Aborted \(CommandIssued\)" || fail "describe vcjob: no Aborted phase event: $DESCRIBE"
ok "kubectl describe vcjob: the command and the phase changes it caused"
expect "job resume" "$("${T[@]}" job resume pausable | norm)" "job.batch.volcano.sh/pausable: ResumeJob requested (command.bus.volcano.sh/pausable-resumejob-XXXXX)"
wait_phase pausable Running 60
"${K[@]}" wait --for=jsonpath='{.status.running}'=3 vcjob/pausable --timeout=30s >/dev/null || fail "pods back after resume"
# Column widths depend on the other job's row here: spaces collapsed, the columns checked.
expect "job list -A -o wide" "$("${T[@]}" job list -A -o wide | grep -E '^(NAMESPACE|default +pausable)' | squeeze)" \
  "NAMESPACE NAME PHASE MIN PENDING RUNNING SUCCEEDED FAILED RETRIES AGE QUEUE REPLICAS UNKNOWN TERMINATING REASON
default pausable Running 3 0 3 0 0 1 AGE default 3 0 0 $("${K[@]}" get vcjob pausable -o jsonpath='{.status.state.reason}')"
expect "job restart" "$("${T[@]}" job restart pausable | norm)" "job.batch.volcano.sh/pausable: RestartJob requested (command.bus.volcano.sh/pausable-restartjob-XXXXX)"
"${K[@]}" wait --for=jsonpath='{.status.retryCount}'=2 vcjob/pausable --timeout=30s >/dev/null || fail "the restart did not count a retry"
wait_phase pausable Running 60
ok "restart counted a retry and the job runs again"
expect "commands consumed" "$("${K[@]}" get commands -A -o name | wc -l | tr -d ' ')" "0"
"${T[@]}" job list -o json | grep -q '"kind": "List"' || fail "job list -o json"
"${T[@]}" job view pausable -o yaml | grep -q '^kind: Job$' || fail "job view -o yaml"
ok "-o json and -o yaml"
expect "job delete" "$("${T[@]}" job delete pausable)" 'job.batch.volcano.sh "pausable" deleted'
run_fails "delete it again" 'tephra: error: job "pausable" not found in namespace "default"' "${T[@]}" job delete pausable

# Why a job waits: a gang its queue cannot hold, then the queue closed. `tephra pg list` and
# `kubectl describe` of the PodGroup and of the vcJob say so in words a user can act on.
"${T[@]}" queue create small >/dev/null || fail "queue create small"
wait_queue small Open
sed 's/name: hello-gang/name: big/; s/^spec:/spec:\n  queue: small/; s/cpu: 500m/cpu: "9"/' \
  "$ROOT/tests/data/manifests/vcjob-run.yaml" >"$WORK/big.yaml"
"${T[@]}" job run -f "$WORK/big.yaml" >/dev/null || fail "job run big"
for _ in $(seq 1 100); do
  "${K[@]}" get podgroup -o jsonpath='{.items[*].status.conditions[*].reason}' | grep -q NotEnqueued && break
  sleep 0.1
done
PG_NAME="$("${K[@]}" get podgroup -o jsonpath='{.items[0].metadata.name}')"
PAD="$(printf '%*s' $((${#PG_NAME} - 4)) '')"
expect "pg list" "$("${T[@]}" pg list | norm)" "NAME$PAD   PHASE     MINMEMBER   RUNNING   SUCCEEDED   FAILED   QUEUE   AGE
big-UID   Pending   3           0         0           0        small   AGE"
WHY="gang not admitted to its queue yet, no pod is created until it is: queue resource quota insufficient: queue small can hold cpu 24, memory 96Gi, less than the gang's cpu 27, memory 384Mi alone (short by cpu 3)"
expect "pg list -o wide says why" "$("${T[@]}" pg list -o wide | tail -n 1 | norm | squeeze)" \
  "big-UID Pending 3 0 0 0 small AGE Job/big NotEnqueued $WHY"
DESCRIBE="$("${K[@]}" describe pg "$PG_NAME")"
echo "$DESCRIBE" | grep -qF "Message:               $WHY" || fail "describe pg has no condition saying why: $DESCRIBE"
echo "$DESCRIBE" | grep -qF "Reason:                NotEnqueued" || fail "describe pg: no NotEnqueued reason: $DESCRIBE"
echo "$DESCRIBE" | grep -qE "Normal +Unschedulable .*short by cpu 3" || fail "describe pg: no Unschedulable event: $DESCRIBE"
ok "kubectl describe pg: the condition and the Events say the queue is short by cpu 3"
for _ in $(seq 1 100); do
  "${K[@]}" describe vcjob big | grep -q PodGroupPending && break
  sleep 0.1
done
DESCRIBE="$("${K[@]}" describe vcjob big)"
echo "$DESCRIBE" | grep -qF "PodGroup default:big unschedulable, reason: $WHY" || fail "describe vcjob: no PodGroupPending event: $DESCRIBE"
echo "$DESCRIBE" | grep -qE "Normal +Pending .*new job -> Pending" || fail "describe vcjob: no phase event: $DESCRIBE"
ok "kubectl describe vcjob: why the job waits, and its phase change"
VIEW="$("${T[@]}" job view big)"
echo "$VIEW" | grep -qF "PodGroup:      $PG_NAME (Pending): NotEnqueued: $WHY" || fail "job view does not say why: $VIEW"
ok "job view says why the job waits"
"${T[@]}" queue close small >/dev/null || fail "queue close small"
for _ in $(seq 1 100); do
  "${K[@]}" describe pg "$PG_NAME" | grep -qE "queue small is Clos(ed|ing), not Open" && break
  sleep 0.1
done
"${K[@]}" describe pg "$PG_NAME" | grep -qE "gang not admitted to its queue yet, no pod is created until it is: queue small is Clos(ed|ing), not Open" \
  || fail "describe pg does not say the queue is closed: $("${K[@]}" describe pg "$PG_NAME")"
ok "kubectl describe pg: the queue is closed"
"${T[@]}" job delete big >/dev/null || fail "job delete big"
# The queue can go once its PodGroup has (garbage collection follows the job's deletion).
for _ in $(seq 1 100); do
  "${T[@]}" queue delete small >/dev/null 2>&1 && break
  sleep 0.1
done
run_fails "queue small deleted" 'tephra: error: queue "small" not found' "${T[@]}" queue get small

# Queues.
expect "queue create" "$("${T[@]}" queue create research --weight 3 --capability cpu=4,memory=8Gi)" "queue.scheduling.volcano.sh/research created"
wait_queue research Open
expect "queue list" "$("${T[@]}" queue list | norm)" "NAME       STATE   WEIGHT   PARENT   INQUEUE   PENDING   RUNNING   UNKNOWN   COMPLETED   AGE
default    Open    1        <none>   0         0         0         0         0           AGE
research   Open    3        <none>   0         0         0         0         0           AGE
root       Open    1        <none>   0         0         0         0         0           AGE"
expect "queue get -o wide" "$("${T[@]}" queue get research -o wide | squeeze)" \
  "NAME STATE WEIGHT PARENT INQUEUE PENDING RUNNING UNKNOWN COMPLETED AGE CAPABILITY ALLOCATED RECLAIMABLE
research Open 3 <none> 0 0 0 0 0 AGE cpu=4,memory=8Gi <none> true"
expect "queue close" "$("${T[@]}" queue close research | norm)" "queue.scheduling.volcano.sh/research: CloseQueue requested (command.bus.volcano.sh/research-closequeue-XXXXX)"
wait_queue research Closed
expect "queue get" "$("${T[@]}" queue get research | norm)" "NAME       STATE    WEIGHT   PARENT   INQUEUE   PENDING   RUNNING   UNKNOWN   COMPLETED   AGE
research   Closed   3        <none>   0         0         0         0         0           AGE"
expect "queue open" "$("${T[@]}" queue open research | norm)" "queue.scheduling.volcano.sh/research: OpenQueue requested (command.bus.volcano.sh/research-openqueue-XXXXX)"
wait_queue research Open
ok "queue closed and opened by Command"
expect "queue operate -a update -w" "$("${T[@]}" queue operate research -a update -w 5)" "queue.scheduling.volcano.sh/research patched"
expect "the new weight" "$("${K[@]}" get queue research -o jsonpath='{.spec.weight}')" "5"
expect "queue operate --name -a close" "$("${T[@]}" queue operate --name research -a close | norm)" "queue.scheduling.volcano.sh/research: CloseQueue requested (command.bus.volcano.sh/research-closequeue-XXXXX)"
wait_queue research Closed
expect "queue operate -a open" "$("${T[@]}" queue operate research -a open | norm)" "queue.scheduling.volcano.sh/research: OpenQueue requested (command.bus.volcano.sh/research-openqueue-XXXXX)"
wait_queue research Open
run_fails "queue operate -a update without -w" "tephra: error: queue operate -a update needs the new weight: -w WEIGHT" "${T[@]}" queue operate research -a update
# A negative weight is a value the bounds refuse, not an unknown flag (clap's usage errors exit 2).
rc=0; err="$("${T[@]}" queue create neg --weight -1 2>&1)" || rc=$?
[ "$rc" = 2 ] || fail "queue create --weight -1: exit code $rc, want 2"
expect "queue create --weight -1" "$err" "tephra: error: invalid value '-1' for '--weight <WEIGHT>': -1 is not in 1..=65535 (see 'tephra --help')"
expect "a CLI queue has no annotations, as one from kubectl create" "$("${K[@]}" get queue research -o jsonpath='{.metadata.annotations}')" ""
run_fails "queue delete of an Open queue" 'tephra: error: deleting queue research: admission webhook "validatequeue.tephra.io" denied the request: only queue with state `Closed` can be deleted, queue `research` state is `Open`' "${T[@]}" queue delete research
"${T[@]}" queue close research >/dev/null || fail "queue close research"
wait_queue research Closed
expect "queue delete" "$("${T[@]}" queue delete research)" 'queue.scheduling.volcano.sh "research" deleted'
run_fails "queue get after delete" 'tephra: error: queue "research" not found' "${T[@]}" queue get research

echo "vcctl: $PASSED passed"
