#!/usr/bin/env bash
# tephra against the real control plane: starts one with up.sh (etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler with tephra as its
# extender, kwok nodes), installs tephra the way the README's "Deploying to a
# cluster" says for a tephra running outside the cluster, then runs the
# scenarios and prints `N passed, M failed, K skipped`. Exits non-zero if any
# scenario failed.
#
# Pods "run" on kwok's fake nodes; a pod carrying the annotation
# kwok.tephra.test/succeed-after ends Succeeded that long after it started
# (tests/cluster/kwok-stages.yaml).
#
# Environment:
#   TEPHRA_BIN            the tephra binary (default: cargo build of this checkout)
#   TEPHRA_CLUSTER_NODES  number of fake nodes (default 4, of 8 cpu each)
#   TEPHRA_CLUSTER_KEEP   set to 1 to leave everything running (prints where)
#   TEPHRA_CLUSTER_ONLY   a regular expression: run only the scenarios whose names match it
#                         (the others are counted as skipped)
set -euo pipefail
# shellcheck source=tests/cluster/lib.sh
. "$(dirname "$0")/lib.sh"

if [ -z "${TEPHRA_BIN:-}" ]; then
  (cd "$repo_dir" && cargo build -q --bin tephra)
  TEPHRA_BIN="${CARGO_TARGET_DIR:-$repo_dir/target}/debug/tephra"
fi
nodes=${TEPHRA_CLUSTER_NODES:-4}

work=$(mktemp -d "${TMPDIR:-/tmp}/tephra-run.XXXXXX")
tephra_pid=""
cluster_up=0
cleanup() {
  local rc=$?
  if [ "${TEPHRA_CLUSTER_KEEP:-0}" = 1 ]; then
    echo "run.sh: left running: KUBECONFIG=$work/cluster/kubeconfig, tephra pid $tephra_pid, logs in $work" >&2
    return
  fi
  if declare -F stop_operators >/dev/null; then stop_operators; fi
  stop_tephra
  if [ "$cluster_up" = 1 ]; then "$cluster_dir/down.sh" "$work/cluster" || true; fi
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT

# The scenarios run first with the extender engine (kube-scheduler's profile `volcano` calls
# tephra), then with the native one (the cluster's default profile schedules gangs itself):
# a second kube-scheduler with the default profile runs beside the first.
tephra_serve_args=(--gang-engine extender)
export TEPHRA_DEFAULT_SCHEDULER=1
# shellcheck source=tests/cluster/tephra-up.sh
. "$cluster_dir/tephra-up.sh"

if [ "${TEPHRA_CLUSTER_BENCH:-0}" = 1 ]; then
  # shellcheck source=tests/cluster/bench-body.sh
  . "$cluster_dir/bench-body.sh"
  exit 0
fi

# --- helpers ------------------------------------------------------------------
passed=0 failed=0 skipped=0
why=""
# wait_until SECONDS CMD...: polls CMD every 0.5 s for at most SECONDS.
wait_until() {
  local secs=$1 i
  shift
  for ((i = 0; i < secs * 2; i++)); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.5
  done
  return 1
}
phase_is() { [ "$(k get vcjob "$1" -o jsonpath='{.status.state.phase}')" = "$2" ]; }
# wait_phase JOB PHASE SECONDS: sets `why` when it times out.
wait_phase() {
  wait_until "$3" phase_is "$1" "$2" && return 0
  why="vcjob/$1 is '$(k get vcjob "$1" -o jsonpath='{.status.state.phase}' 2>&1)', not $2 after $3 s"
  return 1
}
# Sum of tephra_extender_requests_total for one verb, all results.
extender_calls() {
  curl -sf "http://127.0.0.1:$metrics_port/metrics" \
    | awk -v v="verb=\"$1\"" '/^tephra_extender_requests_total\{/ && index($0, v) { s += $NF } END { print s + 0 }'
}
# Gang members the binder bound before kube-scheduler asked for them (--bind-ahead).
bound_ahead() {
  curl -sf "http://127.0.0.1:$metrics_port/metrics" \
    | awk '/^tephra_extender_gang_binds_total\{/ && index($0, "outcome=\"ahead\"") { s += $NF } END { print s + 0 }'
}
# vcjob NAME REPLICAS CPU SUCCEED_AFTER [MIN_AVAILABLE]: a one-task gang of REPLICAS pods
# (needing MIN_AVAILABLE of them, default all) that all end Succeeded SUCCEED_AFTER after
# they start.
vcjob() {
  cat <<YAML
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: $1}
spec:
  minAvailable: ${5:-$2}
  schedulerName: volcano
  tasks:
    - name: work
      replicas: $2
      template:
        metadata:
          annotations: {kwok.tephra.test/succeed-after: "$4"}
        spec:
          restartPolicy: Never
          containers:
            - name: work
              image: busybox:1.36
              command: ["true"]
              resources:
                requests: {cpu: "$3", memory: 128Mi}
YAML
}
job_pods() { k get pods -l "volcano.sh/job-name=$1" -o name | wc -l | tr -d ' '; }
# scenario NAME FUNCTION: runs it, counts the outcome. A function returns 0
# (pass), 1 (fail, with `why`) or 2 (skipped, with `why`).
scenario() {
  local name=$1 rc=0 start
  if [ -n "${TEPHRA_CLUSTER_ONLY:-}" ] && ! [[ "$name" =~ $TEPHRA_CLUSTER_ONLY ]]; then
    skipped=$((skipped + 1))
    return
  fi
  start=$(date +%s)
  why=""
  "$2" || rc=$?
  case $rc in
    0) passed=$((passed + 1)); echo "ok - $name ($(($(date +%s) - start)) s)" ;;
    2) skipped=$((skipped + 1)); echo "skipped - $name: $why" ;;
    *) failed=$((failed + 1)); echo "not ok - $name: $why" ;;
  esac
}

# shellcheck source=tests/cluster/frameworks.sh
. "$cluster_dir/frameworks.sh"

# --- scenarios ----------------------------------------------------------------
s_job_completes() {
  local before_filter before_bind before_ahead
  before_filter=$(extender_calls filter) before_bind=$(extender_calls bind) before_ahead=$(bound_ahead)
  # tests/data's hello-gang: the master ends after 3 s, TaskCompleted ->
  # CompleteJob stops the two workers (which would run forever).
  sed 's|simulation.tephra.io/run-seconds: "2"|&\n            kwok.tephra.test/succeed-after: "3s"|' \
    "$repo_dir/tests/data/manifests/vcjob-run.yaml" | k apply -f - >/dev/null || { why="apply failed"; return 1; }
  wait_phase hello-gang Completed 90 || return 1
  local filter bind ahead
  filter=$(extender_calls filter) bind=$(extender_calls bind) ahead=$(bound_ahead)
  # Each of the 3 pods is bound through tephra's extender: at kube-scheduler's bind call,
  # or ahead of it (--bind-ahead) at the first member's call or once the gang's plan gates
  # are off. In the last case kube-scheduler may never ask about a pod at all (it is bound
  # before kube-scheduler's queue reaches it), so filter calls are not required.
  if [ $((bind - before_bind + ahead - before_ahead)) -lt 3 ]; then
    why="tephra's extender metrics show fewer than 3 binds (filter $before_filter -> $filter, bind $before_bind -> $bind, bound ahead $before_ahead -> $ahead)"
    return 1
  fi
  [ "$(k get vcjob hello-gang -o jsonpath='{.status.state.reason}')" = TaskCompleted ] \
    || { why="completed for '$(k get vcjob hello-gang -o jsonpath='{.status.state.reason}')', not TaskCompleted"; return 1; }
  wait_until 60 bash -c "[ \"\$(kubectl get pods -l volcano.sh/job-name=hello-gang,volcano.sh/task-spec=worker -o name | wc -l)\" = 0 ]" \
    || { why="the workers were not stopped"; return 1; }
  echo "#   extender calls: filter $before_filter -> $filter, bind $before_bind -> $bind, bound ahead $before_ahead -> $ahead"
}

s_invalid_refused() {
  local out
  if out=$(k apply -f "$repo_dir/tests/data/manifests/vcjob-invalid.yaml" 2>&1); then
    why="kube-apiserver accepted an invalid vcJob"
    return 1
  fi
  # kube-apiserver's wording around the webhook's own message.
  case $out in
    *'admission webhook "validatejob.tephra.io" denied the request'*minAvailable*) ;;
    *) why="unexpected refusal: $out"; return 1 ;;
  esac
  echo "#   ${out//$'\n'/ }"
}

# Reviews tephra answered on PATH (tephra_admission_requests_total, all operations and results).
admission_calls() {
  curl -sf "http://127.0.0.1:$metrics_port/metrics" \
    | awk -v p="path=\"$1\"" '/^tephra_admission_requests_total\{/ && index($0, p) { s += $NF } END { print s + 0 }'
}
# test_pod NAME SCHEDULER [ANNOTATION]: a pod for SCHEDULER, with one annotation when given.
test_pod() {
  printf 'apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n  annotations: {%s}\nspec:\n  schedulerName: %s\n  containers: [{name: c, image: busybox}]\n' "$1" "${3:-}" "$2"
}
# budget_pod NAME [ANNOTATION]: a pod for tephra's scheduler, with one annotation when given.
budget_pod() { test_pod "$1" volcano "${2:-}"; }
# The pod validation webhook's matchConditions: kube-apiserver sends only the pods that carry a
# disruption-budget annotation (the only ones it can refuse). Server-side dry runs, which call
# the webhooks and store nothing.
s_pod_budget_only_when_annotated() {
  local before after out
  before=$(admission_calls /pods/validate)
  budget_pod plain | k create --dry-run=server -f - >/dev/null || { why="a plain pod was refused"; return 1; }
  after=$(admission_calls /pods/validate)
  [ "$after" = "$before" ] || { why="a pod without a budget was sent to /pods/validate ($before → $after reviews)"; return 1; }
  if out=$(budget_pod bad '"volcano.sh/jdb-min-available": "0%"' | k create --dry-run=server -f - 2>&1); then
    why="kube-apiserver accepted a pod with jdb-min-available 0%"
    return 1
  fi
  case $out in
    *'admission webhook "validatepod.tephra.io" denied the request'*jdb-min-available*) ;;
    *) why="unexpected refusal: $out"; return 1 ;;
  esac
  # The refused pod's review is counted: the count read above is the one that moves.
  [ "$(admission_calls /pods/validate)" -gt "$after" ] \
    || { why="the refused pod's review is not counted on /pods/validate"; return 1; }
  echo "#   a pod without a budget not sent ($before reviews before and after); ${out//$'\n'/ }"
}

# The pod mutation webhook's matchConditions: kube-apiserver sends only the pods for tephra's
# scheduler names, so every other pod of the cluster is created without a round trip to tephra.
s_pod_mutation_only_served() {
  local before after
  before=$(admission_calls /pods/mutate)
  test_pod other default-scheduler | k create --dry-run=server -f - >/dev/null \
    || { why="a pod for default-scheduler was refused"; return 1; }
  after=$(admission_calls /pods/mutate)
  [ "$after" = "$before" ] || { why="a pod for default-scheduler was sent to /pods/mutate ($before → $after reviews)"; return 1; }
  test_pod ours volcano | k create --dry-run=server -f - >/dev/null || { why="a pod for volcano was refused"; return 1; }
  [ "$(admission_calls /pods/mutate)" -gt "$after" ] \
    || { why="a pod for volcano was not sent to /pods/mutate ($after reviews before and after)"; return 1; }
  echo "#   a pod for default-scheduler not sent ($before reviews before and after), one for volcano sent"
}

# Two gangs of 3 pods of 6 cpu on 8-cpu nodes: each gang needs 3 of the 4
# nodes to itself, so they cannot both run; each must run whole, one after
# the other.
# gangs_in_turn A B: the two gangs of the scenario, by name.
gangs_in_turn() {
  local ga=$1 gb=$2
  if [ "$nodes" -ne 4 ]; then why="sized for 4 nodes (TEPHRA_CLUSTER_NODES=$nodes)"; return 2; fi
  vcjob "$ga" 3 6 6s | k apply -f - >/dev/null || { why="apply $ga"; return 1; }
  vcjob "$gb" 3 6 6s | k apply -f - >/dev/null || { why="apply $gb"; return 1; }
  # Each pod needs 6 of a node's 8 cpu: at most one per node, 4 in all. The second gang may
  # start while the first's last pod is finishing (kwok ends them one by one), never beside
  # the whole first gang.
  local i a b max_a=0 max_b=0 max_sum=0 both=0
  for ((i = 0; i < 240; i++)); do
    a=$(k get pods -l volcano.sh/job-name=$ga --field-selector=status.phase=Running -o name | wc -l)
    b=$(k get pods -l volcano.sh/job-name=$gb --field-selector=status.phase=Running -o name | wc -l)
    [ "$a" -gt "$max_a" ] && max_a=$a
    [ "$b" -gt "$max_b" ] && max_b=$b
    [ $((a + b)) -gt "$max_sum" ] && max_sum=$((a + b))
    if [ "$a" -gt 0 ] && [ "$b" -gt 0 ]; then both=1; fi
    phase_is "$ga" Completed && phase_is "$gb" Completed && break
    sleep 0.5
  done
  if ! phase_is "$ga" Completed || ! phase_is "$gb" Completed; then
    why="$ga '$(k get vcjob "$ga" -o jsonpath='{.status.state.phase}')', $gb '$(k get vcjob "$gb" -o jsonpath='{.status.state.phase}')' after 120 s"
    return 1
  fi
  [ "$max_sum" -le 4 ] || { why="$max_sum pods of 6 cpu ran at once on 4 nodes of 8 cpu"; return 1; }
  # Every pod of each gang must have started before any finished.
  local job starts ends
  for job in "$ga" "$gb"; do
    starts=$(k get pods -l "volcano.sh/job-name=$job" -o jsonpath='{range .items[*]}{.status.startTime}{"\n"}{end}' | sort | tail -n 1)
    ends=$(k get pods -l "volcano.sh/job-name=$job" -o jsonpath='{range .items[*]}{.status.containerStatuses[0].state.terminated.finishedAt}{"\n"}{end}' | sort | head -n 1)
    [[ ! "$ends" < "$starts" ]] || { why="$job did not run whole: a pod started at $starts, after another finished at $ends"; return 1; }
  done
  local overlap="never both"
  [ "$both" = 0 ] || overlap="both only while the first's last pods finished"
  echo "#   at most $max_a of $ga and $max_b of $gb running, $max_sum in all; $overlap"
}
s_gangs_in_turn() { gangs_in_turn gang-a gang-b; }

web_gang_running() { [ "$(k get pods -l app=web-gang --field-selector=status.phase=Running -o name | wc -l)" -eq 2 ]; }
s_deployment_podgroup() {
  k apply -f "$repo_dir/tests/data/manifests/deployment.yaml" >/dev/null || { why="apply"; return 1; }
  wait_until 90 web_gang_running || { why="web-gang pods not Running: $(k get pods -l app=web-gang --no-headers 2>&1 | tr '\n' ';')"; return 1; }
  local groups pg min
  groups=$(k get pods -l app=web-gang -o jsonpath='{range .items[*]}{.metadata.annotations.scheduling\.k8s\.io/group-name}{"\n"}{end}' | sort -u)
  if [ -z "$groups" ] || [ "$(echo "$groups" | wc -l)" -ne 1 ]; then
    why="the pods name groups '$groups'"
    return 1
  fi
  pg=$groups
  min=$(k get podgroups.scheduling.volcano.sh "$pg" -o jsonpath='{.spec.minMember}' 2>&1) || { why="podgroup $pg: $min"; return 1; }
  [ "$min" = 2 ] || { why="podgroup $pg minMember '$min', not 2"; return 1; }
  echo "#   ReplicaSet pods in PodGroup $pg (minMember 2)"
  k delete deployment web-gang --wait=false >/dev/null
}

doomed_gone() { [ "$(job_pods doomed)" = 0 ] && ! k get podgroups.scheduling.volcano.sh -o name | grep -q doomed; }
s_delete_gc() {
  vcjob doomed 2 500m 1h | k apply -f - >/dev/null || { why="apply"; return 1; }
  wait_phase doomed Running 60 || return 1
  k delete vcjob doomed --wait=false >/dev/null || { why="delete"; return 1; }
  wait_until 60 doomed_gone || { why="after 60 s: pods $(job_pods doomed), podgroups $(k get podgroups.scheduling.volcano.sh -o name | grep -c doomed)"; return 1; }
}

# restart_mid_job NAME: tephra stopped and started while the vcJob NAME runs.
restart_mid_job() {
  vcjob "$1" 2 500m 20s | k apply -f - >/dev/null || { why="apply"; return 1; }
  wait_phase "$1" Running 60 || return 1
  stop_tephra
  sleep 2
  start_tephra || { why="tephra did not restart"; return 1; }
  wait_phase "$1" Completed 90 || return 1
}
s_restart_mid_job() { restart_mid_job survivor; }

# Devices through Dynamic Resource Allocation, published the way a driver would
# (ResourceSlices; kwok has no kubelet plugin to prepare them): one device on
# each of three nodes. A gang of three pods each claiming one device must run
# whole on those three nodes, one pod per node; a second gang that needs two
# devices while none is free waits with nothing bound, then runs whole once the
# first has finished and its claims are gone.
# device_class DRIVER TEMPLATE: a DeviceClass of DRIVER's devices and a ResourceClaimTemplate
# TEMPLATE claiming one of them.
device_class() {
  cat <<YAML
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: $1}
spec:
  selectors:
    - cel: {expression: 'device.driver == "$1"'}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: $2}
spec:
  spec:
    devices:
      requests:
        - name: gpu
          exactly: {deviceClassName: $1}
YAML
}
# device_slices DRIVER NODE...: one device of DRIVER on each NODE, published as a driver would.
device_slices() {
  local driver=$1 n
  shift
  for n in "$@"; do
    cat <<YAML
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: $n-$driver}
spec:
  driver: $driver
  nodeName: $n
  pool: {name: $n-$driver, generation: 1, resourceSliceCount: 1}
  devices:
    - name: dev-0
YAML
  done
}
# gpu_vcjob NAME REPLICAS SUCCEED_AFTER [TEMPLATE]: a gang whose pods each claim one device
# (from the ResourceClaimTemplate TEMPLATE, default one-gpu).
gpu_vcjob() {
  vcjob "$1" "$2" 500m "$3" | sed \
    -e "s|^        spec:\$|        spec:\n          resourceClaims: [{name: gpu, resourceClaimTemplateName: ${4:-one-gpu}}]|" \
    -e 's|^                requests: {cpu: "500m", memory: 128Mi}$|&\n                claims: [{name: gpu}]|'
}
pods_on() { k get pods -l "volcano.sh/job-name=$1" -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | grep -c . || true; }
running_pods() { k get pods -l "volcano.sh/job-name=$1" --field-selector=status.phase=Running -o name | wc -l | tr -d ' '; }
s_dra_gang() {
  if [ "$nodes" -lt 4 ]; then why="needs 4 nodes (TEPHRA_CLUSTER_NODES=$nodes)"; return 2; fi
  local with_devices=(kwok-node-0 kwok-node-1 kwok-node-2)
  { device_class gpu.tephra.test one-gpu; device_slices gpu.tephra.test "${with_devices[@]}"; } \
    | k apply -f - >/dev/null || { why="apply DeviceClass, ResourceClaimTemplate, ResourceSlices"; return 1; }
  gpu_vcjob dra-a 3 25s | k apply -f - >/dev/null || { why="apply dra-a"; return 1; }
  wait_until 90 bash -c "[ \"\$(kubectl get pods -l volcano.sh/job-name=dra-a --field-selector=status.phase=Running -o name | wc -l)\" = 3 ]" \
    || { why="dra-a: $(running_pods dra-a) of 3 pods Running after 90 s: $(k get pods -l volcano.sh/job-name=dra-a -o wide --no-headers 2>&1 | tr -s ' ' | tr '\n' ';')"; return 1; }
  local placed distinct
  placed=$(k get pods -l volcano.sh/job-name=dra-a -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | sort)
  distinct=$(echo "$placed" | sort -u | grep -c .)
  [ "$distinct" = 3 ] || { why="dra-a's 3 pods on $distinct node(s): $(echo "$placed" | tr '\n' ' ')"; return 1; }
  if echo "$placed" | grep -qx kwok-node-3; then why="a pod of dra-a on kwok-node-3, which has no device"; return 1; fi
  # Each pod's claim was allocated the device on the pod's own node.
  local pod node claim pool
  for pod in $(k get pods -l volcano.sh/job-name=dra-a -o name); do
    node=$(k get "$pod" -o jsonpath='{.spec.nodeName}')
    claim=$(k get "$pod" -o jsonpath='{.status.resourceClaimStatuses[0].resourceClaimName}')
    pool=$(k get resourceclaim "$claim" -o jsonpath='{.status.allocation.devices.results[0].pool}' 2>/dev/null)
    [ "$pool" = "$node-gpu.tephra.test" ] || { why="$pod on $node, its claim '$claim' allocated from pool '$pool'"; return 1; }
  done
  # No device is free: the second gang must wait whole.
  gpu_vcjob dra-b 2 2s | k apply -f - >/dev/null || { why="apply dra-b"; return 1; }
  local i bound
  for ((i = 0; i < 180; i++)); do
    bound=$(pods_on dra-b)
    # dra-a's pods only ever stop running: all three running after the count
    # means they were while it was taken.
    if [ "$bound" -gt 0 ] && [ "$(running_pods dra-a)" = 3 ]; then
      why="dra-b got $bound pod(s) bound while dra-a still held every device"; return 1
    fi
    phase_is dra-b Completed && break
    sleep 0.5
  done
  phase_is dra-b Completed || { why="dra-b is '$(k get vcjob dra-b -o jsonpath='{.status.state.phase}')' 90 s after dra-a's devices were to free"; return 1; }
  local starts ends
  starts=$(k get pods -l volcano.sh/job-name=dra-b -o jsonpath='{range .items[*]}{.status.startTime}{"\n"}{end}' | sort | tail -n 1)
  ends=$(k get pods -l volcano.sh/job-name=dra-b -o jsonpath='{range .items[*]}{.status.containerStatuses[0].state.terminated.finishedAt}{"\n"}{end}' | sort | head -n 1)
  [[ ! "$ends" < "$starts" ]] || { why="dra-b did not run whole: a pod started at $starts, after another finished at $ends"; return 1; }
  echo "#   dra-a on $(echo "$placed" | tr '\n' ' ')with its devices; dra-b waited, then ran whole"
  k delete vcjob dra-a dra-b --wait=false >/dev/null
}

# --- the native engine ---------------------------------------------------------
# native_objects NAME: how many of tephra's native Workloads and PodGroups are named NAME
# (or, for a vcJob's name, start with it).
native_objects() { k get "workloads.scheduling.k8s.io,podgroups.scheduling.k8s.io" -l app.kubernetes.io/managed-by=tephra -o name 2>/dev/null | grep -c "/$1" || true; }
engine_in_use() {
  curl -sf "http://127.0.0.1:$metrics_port/metrics" | awk '/^tephra_gang_engine\{/ && $NF == 1 { sub(/.*engine="/, ""); sub(/".*/, ""); print }'
}
s_native_job_completes() {
  [ "$(engine_in_use)" = native ] || { why="tephra_gang_engine says '$(engine_in_use)', not native"; return 1; }
  local before_filter pg
  before_filter=$(extender_calls filter)
  vcjob native-a 3 500m 8s | k apply -f - >/dev/null || { why="apply"; return 1; }
  wait_phase native-a Running 60 || return 1
  pg=$(k get pods -l volcano.sh/job-name=native-a -o jsonpath='{.items[0].metadata.annotations.scheduling\.k8s\.io/group-name}')
  [ -n "$pg" ] || { why="the pods name no PodGroup"; return 1; }
  local min sched group
  min=$(k get podgroups.scheduling.k8s.io "$pg" -o jsonpath='{.spec.schedulingPolicy.gang.minCount}' 2>&1) \
    || { why="no native PodGroup $pg: $min"; return 1; }
  [ "$min" = 3 ] || { why="native PodGroup $pg has minCount '$min', not 3"; return 1; }
  k get workloads.scheduling.k8s.io "$pg" >/dev/null 2>&1 || { why="no native Workload $pg"; return 1; }
  sched=$(k get pods -l volcano.sh/job-name=native-a -o jsonpath='{range .items[*]}{.spec.schedulerName}{"\n"}{end}' | sort -u)
  group=$(k get pods -l volcano.sh/job-name=native-a -o jsonpath='{range .items[*]}{.spec.schedulingGroup.podGroupName}{"\n"}{end}' | sort -u)
  [ "$sched" = default-scheduler ] && [ "$group" = "$pg" ] \
    || { why="pods scheduled by '$sched' in scheduling group '$group'"; return 1; }
  wait_phase native-a Completed 90 || return 1
  [ "$(extender_calls filter)" = "$before_filter" ] \
    || { why="kube-scheduler called tephra's filter ($before_filter -> $(extender_calls filter))"; return 1; }
  echo "#   Workload and PodGroup $pg (minCount 3); pods placed by default-scheduler's gang cycle, no extender call"
}
s_native_gangs_in_turn() { gangs_in_turn native-b native-c; }
# A gang tephra admits but kube-scheduler cannot place (each pod claims a device of a class
# no node has yet) says so in its Volcano PodGroup's Unschedulable condition (reason
# NotPlaced, kube-scheduler's words), and is held back after --native-place-timeout (5 s
# here): its native PodGroup's minCount out of reach, its Volcano PodGroup marked, a NotPlaced
# Event saying why; once devices are published, a later admission places it and it runs whole,
# the condition settled.
held_back() {
  k get events --field-selector reason=NotPlaced -o jsonpath='{range .items[*]}{.involvedObject.name}{"\n"}{end}' | grep -q "^$1"
}
# unschedulable_of JOB: "status reason: message" of the Unschedulable condition of the vcJob's PodGroup.
unschedulable_of() {
  local pg
  pg=$(k get pods -l "volcano.sh/job-name=$1" -o jsonpath='{.items[0].metadata.annotations.scheduling\.k8s\.io/group-name}' 2>/dev/null)
  [ -n "$pg" ] || return 0
  k get podgroups.scheduling.volcano.sh "$pg" -o jsonpath='{range .status.conditions[?(@.type=="Unschedulable")]}{.status} {.reason}: {.message}{end}' 2>/dev/null
}
not_placed_said() { case $(unschedulable_of "$1") in "True NotPlaced: kube-scheduler could not place the gang: "?*) return 0 ;; esac; return 1; }
s_native_hold_back() {
  device_class nodev.tephra.test one-nodev | k apply -f - >/dev/null || { why="apply DeviceClass and ResourceClaimTemplate"; return 1; }
  gpu_vcjob native-e 2 5s one-nodev | k apply -f - >/dev/null || { why="apply native-e"; return 1; }
  wait_until 60 not_placed_said native-e || { why="native-e's PodGroup condition is '$(unschedulable_of native-e)', not kube-scheduler's refusal"; return 1; }
  local condition message
  condition=$(unschedulable_of native-e)
  wait_until 60 held_back native-e || { why="no NotPlaced Event for native-e within 60 s"; return 1; }
  message=$(k get events --field-selector reason=NotPlaced -o jsonpath='{.items[0].message}')
  [ "$(pods_on native-e)" = 0 ] || { why="native-e has $(pods_on native-e) pod(s) bound while held"; return 1; }
  device_slices nodev.tephra.test kwok-node-0 kwok-node-1 | k apply -f - >/dev/null || { why="apply ResourceSlices"; return 1; }
  wait_phase native-e Completed 90 || return 1
  case $(unschedulable_of native-e) in
    "True "*) why="native-e Completed with its condition still '$(unschedulable_of native-e)'"; return 1 ;;
  esac
  echo "#   condition: $condition"
  echo "#   held back: $message"
}

s_native_deployment() {
  k apply -f "$repo_dir/tests/data/manifests/deployment.yaml" >/dev/null || { why="apply"; return 1; }
  wait_until 90 web_gang_running || { why="web-gang pods not Running: $(k get pods -l app=web-gang --no-headers 2>&1 | tr '\n' ';')"; return 1; }
  local groups native_groups
  groups=$(k get pods -l app=web-gang -o jsonpath='{range .items[*]}{.metadata.annotations.scheduling\.k8s\.io/group-name}{"\n"}{end}' | sort -u)
  native_groups=$(k get pods -l app=web-gang -o jsonpath='{range .items[*]}{.spec.schedulingGroup.podGroupName}{"\n"}{end}' | sort -u)
  local mirrored
  mirrored=$(native_objects "$groups")
  k delete deployment web-gang --wait=false >/dev/null
  [ -n "$groups" ] && [ "$groups" = "$native_groups" ] && [ "$mirrored" = 2 ] \
    || { why="the pods name PodGroup '$groups' and scheduling group '$native_groups' ($mirrored native objects)"; return 1; }
  echo "#   ReplicaSet pods in PodGroup $groups, placed by kube-scheduler's gang cycle"
}
s_native_restart_mid_job() { restart_mid_job native-survivor; }
# Two queues of weights 1 and 3, each with more small gangs than its share (four nodes of
# 8 cpu; 14 gangs of 2 pods of 1 cpu per queue, running for an hour): whichever queue got
# ahead while the gangs arrived, gangreclaim takes whole gangs back until the cpu in use is
# 1:3 (8 and 24 of 32, give or take a gang).
queue_cpu() {
  k get pods -l "share-test=$1" --field-selector=status.phase=Running -o name | wc -l | tr -d ' '
}
# share_queues: the queues w1 and w3, of weights 1 and 3, reclaimable.
share_queues() {
  local q
  for q in 1 3; do
    printf 'apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {name: w%s}\nspec: {weight: %s, reclaimable: true}\n' "$q" "$q" \
      | k apply -f - >/dev/null || { why="apply queue w$q"; return 1; }
  done
}
# settle_shares CPU_FN MIN: reads `CPU_FN w1` and `CPU_FN w3` every 5 s until both are
# unchanged over 5 s with w3 at MIN or more, for at most 150 s; leaves them in share_w1 and
# share_w3.
settle_shares() {
  local last="" t
  for ((t = 0; t < 30; t++)); do
    share_w1=$("$1" w1) share_w3=$("$1" w3)
    [ "$share_w1 $share_w3" = "$last" ] && [ "$share_w3" -ge "$2" ] && return 0
    last="$share_w1 $share_w3"
    sleep 5
  done
}
s_native_queues_share() {
  share_queues || return 1
  local i q
  for i in $(seq 1 14); do
    for q in 1 3; do
      vcjob "share-w$q-$i" 2 1 1h | sed -e "s|^  schedulerName: volcano$|  schedulerName: volcano\n  queue: w$q|" \
        -e "s|^          annotations: {kwok.tephra.test/succeed-after: \"1h\"}$|          annotations: {kwok.tephra.test/succeed-after: \"1h\"}\n          labels: {share-test: w$q}|" \
        | k apply -f - >/dev/null || { why="apply share-w$q-$i"; return 1; }
    done
  done
  # Settled near 1:3 and unchanged over 5 s, at most 150 s.
  settle_shares queue_cpu 22
  local a=$share_w1 b=$share_w3
  for i in $(seq 1 14); do k delete vcjob "share-w1-$i" "share-w3-$i" --wait=false >/dev/null 2>&1; done
  [ "$a" -ge 6 ] && [ "$a" -le 10 ] && [ "$b" -ge 22 ] && [ "$b" -le 26 ] \
    || { why="cpu in use by queue w1 $a, w3 $b; want about 8 and 24"; return 1; }
  echo "#   cpu in use: queue w1 (weight 1) $a, queue w3 (weight 3) $b"
}
# Racks from node labels (tephra's --controller-config discovers them as tier-1 HyperNodes):
# kwok-node-0 and -1 in rack a, -2 and -3 in rack b. A gang in hard mode at tier 1 gets the
# native topology constraint on the rack label and runs inside one rack; a gang no rack can
# hold waits with nothing bound.
topo_vcjob() { # NAME REPLICAS [TIER]: pods of 5 cpu, hard mode, highest tier TIER (1)
  vcjob "$1" "$2" 5 1h | sed -e "s|^  schedulerName: volcano$|  schedulerName: volcano\n  networkTopology: {mode: hard, highestTierAllowed: ${3:-1}}|"
}
# Three gangs of 8 × 2 cpu needing 2 each (48 cpu asked of 32): kube-scheduler holds a native
# PodGroup while any of its pods is gated, so only each gang's minimum is in its native group
# (the rest marked elastic, placed one by one); all three start, none waits for the others.
elastic_all_running() {
  local j
  for j in elastic-a elastic-b elastic-c; do [ "$(running_pods "$j")" -ge 2 ] || return 1; done
}
s_native_elastic() {
  local j
  for j in elastic-a elastic-b elastic-c; do
    vcjob "$j" 8 2 20s 2 | k apply -f - >/dev/null || { why="apply $j"; return 1; }
  done
  wait_until 90 elastic_all_running \
    || { why="not all three gangs started: $(for j in elastic-a elastic-b elastic-c; do printf '%s=%s ' "$j" "$(running_pods "$j")"; done)"; return 1; }
  local members elastic
  members=$(k get pods -l volcano.sh/job-name=elastic-a -o jsonpath='{range .items[?(@.spec.schedulingGroup)]}{.metadata.name}{"\n"}{end}' | sort | tr '\n' ' ')
  elastic=$(k get pods -l volcano.sh/job-name=elastic-a -o jsonpath='{range .items[*]}{.metadata.annotations.scheduling\.tephra\.io/elastic}{"\n"}{end}' | grep -c true || true)
  [ "$members" = "elastic-a-work-0 elastic-a-work-1 " ] && [ "$elastic" = 6 ] \
    || { why="elastic-a: native members '$members', $elastic pods marked elastic (want work-0 and work-1, 6)"; return 1; }
  for j in elastic-a elastic-b elastic-c; do wait_phase "$j" Completed 180 || return 1; done
  echo "#   each gang's 2 core pods in its native PodGroup, 6 elastic; all three ran to Completed"
}
s_native_topology() {
  local n
  for n in 0 1 2 3; do
    k label node "kwok-node-$n" --overwrite "topology.tephra.test/rack=$([ "$n" -lt 2 ] && echo a || echo b)" >/dev/null \
      || { why="label kwok-node-$n"; return 1; }
  done
  topo_vcjob native-topo 2 | k apply -f - >/dev/null || { why="apply native-topo"; return 1; }
  wait_phase native-topo Running 60 || return 1
  local pg key racks
  pg=$(k get pods -l volcano.sh/job-name=native-topo -o jsonpath='{.items[0].spec.schedulingGroup.podGroupName}')
  key=$(k get podgroups.scheduling.k8s.io "$pg" -o jsonpath='{.spec.schedulingConstraints.topology[0].key}')
  [ "$key" = topology.tephra.test/rack ] || { why="native PodGroup $pg has topology key '$key'"; return 1; }
  racks=$(for n in $(k get pods -l volcano.sh/job-name=native-topo -o jsonpath='{range .items[*]}{.spec.nodeName}{" "}{end}'); do
    k get node "$n" -o jsonpath='{.metadata.labels.topology\.tephra\.test/rack}{"\n"}'; done | sort -u | tr '\n' ' ')
  [ "$(echo "$racks" | wc -w)" = 1 ] || { why="native-topo's pods span racks: $racks"; return 1; }
  topo_vcjob native-topo-big 3 | k apply -f - >/dev/null || { why="apply native-topo-big"; return 1; }
  sleep 10
  [ "$(pods_on native-topo-big)" = 0 ] || { why="native-topo-big (3 pods of 5 cpu, racks of two 8-cpu nodes) got $(pods_on native-topo-big) pod(s) bound"; return 1; }
  k delete vcjob native-topo native-topo-big --wait=false >/dev/null
  echo "#   native-topo inside rack $racks(constraint on $key); native-topo-big waits with nothing bound"
}
# Hand-made HyperNodes of tier 2 that cut across the nodes' order (kwok-node-0 with -3, -1 with
# -2); tier 1 is the label-discovered racks' (--controller-config), which kube-scheduler follows
# by the native PodGroup's topology constraint. kube-scheduler knows nothing of these, so the
# session's choice reaches it as the required node affinity tephra adds as the gates come off.
hand_hypernode() { # NAME NODE NODE
  printf 'apiVersion: topology.volcano.sh/v1alpha1\nkind: HyperNode\nmetadata: {name: %s}\nspec:\n  tier: 2\n  members:\n  - {type: Node, selector: {exactMatch: {name: %s}}}\n  - {type: Node, selector: {exactMatch: {name: %s}}}\n' "$1" "$2" "$3"
}
s_native_handmade_topology() {
  local rc=0
  handmade_topology || rc=$?
  # Whatever happened, the next scenarios must not meet these HyperNodes or this gang.
  k delete vcjob native-hand --wait=false >/dev/null 2>&1 || true
  k delete hypernodes.topology.volcano.sh hand-x hand-y --wait=false >/dev/null 2>&1 || true
  return "$rc"
}
handmade_topology() {
  hand_hypernode hand-x kwok-node-0 kwok-node-3 | k apply -f - >/dev/null || { why="apply hand-x"; return 1; }
  hand_hypernode hand-y kwok-node-1 kwok-node-2 | k apply -f - >/dev/null || { why="apply hand-y"; return 1; }
  topo_vcjob native-hand 2 2 | k apply -f - >/dev/null || { why="apply native-hand"; return 1; }
  wait_phase native-hand Running 60 || return 1
  local on pinned
  on=$(k get pods -l volcano.sh/job-name=native-hand -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | sort | tr '\n' ' ')
  case "$on" in
    "kwok-node-0 kwok-node-3 " | "kwok-node-1 kwok-node-2 ") ;;
    *) why="native-hand's pods on $on, not inside hand-x (0, 3) or hand-y (1, 2)"; return 1 ;;
  esac
  pinned=$(k get pods -l volcano.sh/job-name=native-hand -o jsonpath='{range .items[*]}{range .spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[*]}{.matchFields[0].values[0]}{" "}{end}{"\n"}{end}' | sort -u)
  [ "$(echo "$pinned" | wc -l)" = 1 ] && [ -n "$pinned" ] || { why="pods not pinned to one HyperNode: $pinned"; return 1; }
  echo "#   native-hand on $on(pinned to $pinned)"
}
native_gone() { [ "$(native_objects "$1")" = 0 ]; }
s_native_delete_gc() {
  # A finished vcJob's PodGroup goes, and its native objects with it.
  local pg
  wait_until 30 native_gone native-a || { why="native objects of the finished native-a left: $(native_objects native-a)"; return 1; }
  vcjob native-d 2 500m 1h | k apply -f - >/dev/null || { why="apply"; return 1; }
  wait_phase native-d Running 60 || return 1
  pg=$(k get podgroups.scheduling.volcano.sh -o name | grep native-d | head -n 1)
  pg=${pg##*/}
  [ "$(native_objects "$pg")" = 2 ] || { why="$(native_objects "$pg") native objects for $pg, not 2"; return 1; }
  k delete vcjob native-d --wait=false >/dev/null || { why="delete"; return 1; }
  wait_until 60 native_gone "$pg" || { why="native objects of $pg left 60 s after the vcJob's deletion: $(native_objects "$pg")"; return 1; }
}

scenario "a vcJob applied with kubectl runs to Completed, each pod bound through tephra's extender" s_job_completes
scenario "an invalid vcJob is refused by kube-apiserver with tephra's message" s_invalid_refused
scenario "kube-apiserver sends tephra only the pods with a disruption budget, and refuses a bad one with tephra's message" s_pod_budget_only_when_annotated
scenario "kube-apiserver sends tephra's pod mutation only the pods for tephra's scheduler names" s_pod_mutation_only_served
scenario "two gangs that cannot both fit run one after the other, each whole" s_gangs_in_turn
scenario "a Deployment with group-min-member gets its PodGroup through the ReplicaSet controller's pods" s_deployment_podgroup
scenario "deleting a vcJob removes its pods through the garbage collector" s_delete_gc
scenario "tephra restarted mid-job finishes it" s_restart_mid_job
scenario "a gang claiming devices through DRA runs whole where the devices are, and the next waits for them" s_dra_gang
scenario "KubeRay: a RayCluster's PodGroup made by ray-operator is used as it is and the cluster becomes ready" s_ray_cluster
scenario "KubeRay: a RayCluster that cannot fit waits whole, then runs once nodes are added" s_ray_waits_whole
scenario "KubeRay: a RayJob runs its cluster whole, then its submitter, to Complete" s_ray_job
scenario "Kubeflow training operator: a PyTorchJob's PodGroup is used as made and the job Succeeds" s_pytorch_job
scenario "MPI Operator: an MPIJob's launcher and workers run as one gang and the job Succeeds" s_mpi_job
scenario "Spark Operator: a SparkApplication's PodGroup is used as made and the app is COMPLETED" s_spark_app
stop_operators

echo "# the native engine: tephra restarted with --gang-engine native"
stop_tephra
# Volcano's default configuration with gangreclaim, which the queues' shares need: every gang
# of the share scenario runs exactly minAvailable pods, so only whole gangs can be taken back.
cat >"$work/reclaim.conf" <<'CONF'
actions: "enqueue, allocate, gangreclaim, backfill"
tiers:
  - plugins: [{name: priority}, {name: gang}, {name: conformance}]
  - plugins: [{name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder}, {name: binpack}]
CONF
cat >"$work/controller.conf" <<'CONF'
networkTopologyDiscovery:
  - source: label
    enabled: true
    config:
      networkTopologyTypes:
        rack:
          - nodeLabel: topology.tephra.test/rack
          - nodeLabel: kubernetes.io/hostname
CONF
tephra_serve_args=(--gang-engine native --native-place-timeout 5s --config "$work/reclaim.conf"
  --controller-config "$work/controller.conf")
if start_tephra; then
  scenario "native: a vcJob runs to Completed through kube-scheduler's own gang scheduling" s_native_job_completes
  scenario "native: two gangs that cannot both fit run one after the other, each whole" s_native_gangs_in_turn
  scenario "native: a gang kube-scheduler cannot place is held back, then runs once it can be placed" s_native_hold_back
  scenario "native: a Deployment with group-min-member runs as a gang" s_native_deployment
  scenario "native: tephra restarted mid-job finishes it" s_native_restart_mid_job
  scenario "native: two queues of weights 1 and 3 share the cluster 1:3" s_native_queues_share
  scenario "native: a hard gang on hand-made HyperNodes runs inside the one the session chose" s_native_handmade_topology
  scenario "native: a gang in hard network-topology mode runs inside one rack, one no rack holds waits" s_native_topology
  scenario "native: three gangs larger than their minimum all start on a cluster that holds none whole" s_native_elastic
  scenario "native: a vcJob finished or deleted takes its Workload and PodGroup with it" s_native_delete_gc
  scenario "native: KubeRay: a RayCluster's PodGroup made by ray-operator is used as it is and the cluster becomes ready" s_ray_cluster
  scenario "native: KubeRay: RayClusters in queues of weights 1 and 3 share a full cluster 1:3" s_ray_queues_share
  scenario "native: KubeRay: a RayJob runs its cluster whole, then its submitter, to Complete" s_ray_job
  scenario "native: Kubeflow training operator: a PyTorchJob's PodGroup is used as made and the job Succeeds" s_pytorch_job
  scenario "native: Kubeflow training operator: PyTorchJobs in queues of weights 1 and 3 share a full cluster 1:3" s_pytorch_shares
  scenario "native: MPI Operator: an MPIJob's launcher and workers run as one gang and the job Succeeds" s_mpi_job
  scenario "native: MPI Operator: MPIJobs in queues of weights 1 and 3 share a full cluster 1:3" s_mpi_shares
  scenario "native: Spark Operator: a SparkApplication's PodGroup is used as made and the app is COMPLETED" s_spark_app
  scenario "native: Spark Operator: SparkApplications in queues of weights 1 and 3 share a full cluster 1:3" s_spark_shares
  stop_operators
else
  failed=$((failed + 1))
  echo "not ok - tephra did not start with --gang-engine native"
fi

if [ "$failed" -gt 0 ]; then
  echo "--- last lines of tephra's log" >&2
  tail -n 40 "$work/tephra.log" >&2
fi
echo "cluster: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
