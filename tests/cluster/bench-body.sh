# shellcheck shell=bash
# The placement benchmark, sourced by run.sh when TEPHRA_CLUSTER_BENCH=1
# (start it with bench.sh): with tephra installed and running, it measures
# pods placed per second by kube-scheduler alone and by kube-scheduler with
# tephra as its extender, for plain pods and for gangs, in one run.
#
# Each phase creates its pods while no scheduler serves them, then starts the
# scheduler and times from its first placement to its last, so pod creation
# (and tephra's PodGroup and Job controllers) is not in the figure. Placements
# are read from kube-scheduler's own counter
# scheduler_schedule_attempts_total{result="scheduled"}, which counts a pod
# once it is bound.
# Uses from run.sh: k, work, cluster_dir, bin_dir; env of up.sh.
# shellcheck disable=SC2154 # those come from run.sh and lib.sh

bench_pods=${TEPHRA_BENCH_PODS:-5000}
bench_gangs=${TEPHRA_BENCH_GANGS:-500}
gang_size=10
cdir=$work/cluster
# shellcheck source=/dev/null
. "$cdir/env"
results=()

# stop_scheduler: stops the kube-scheduler whose pid down.sh knows.
stop_scheduler() {
  local pid i
  pid=$(cat "$cdir/pids/kube-scheduler.pid")
  kill "$pid" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -9 "$pid" 2>/dev/null || true
}

# start_scheduler CONFIG: one kube-scheduler, recorded where down.sh looks.
start_scheduler() {
  "$bin_dir/kube-scheduler" --config "$1" \
    --authentication-kubeconfig "$KUBECONFIG" --authorization-kubeconfig "$KUBECONFIG" \
    --bind-address 127.0.0.1 --secure-port "$SCHEDULER_PORT" >>"$cdir/logs/kube-scheduler.log" 2>&1 &
  echo $! >"$cdir/pids/kube-scheduler.pid"
}

# bound_count NS: pods of NS bound to a node.
bound_count() {
  k get pods -n "$1" --field-selector spec.nodeName!= -o name 2>/dev/null | wc -l || echo 0
}

# measure LABEL NS N: waits (at most 5 min) until N pods of NS are bound, and
# records pods/s between the first and the last placement seen.
measure() {
  local label=$1 ns=$2 n=$3 c t t0="" c0=0 t1="" i
  for ((i = 0; i < 600; i++)); do
    c=$(bound_count "$ns")
    t=$(date +%s.%N)
    if [ -z "$t0" ] && [ "$c" -gt 0 ]; then t0=$t c0=$c; fi
    if [ "$c" -ge "$n" ]; then t1=$t; break; fi
    sleep 0.5
  done
  if [ -z "$t1" ]; then
    results+=("$label: only ${c:-0} of $n placed in 5 min")
  else
    results+=("$(awk -v l="$label" -v n="$n" -v c0="$c0" -v a="$t0" -v b="$t1" \
      'BEGIN { d = b - a; if (d <= 0) d = 0.5; printf "%s: %d pods in %.1f s = %.0f pods/s", l, n - c0, d, (n - c0) / d }')")
  fi
  echo "bench: ${results[-1]}"
}

# pods_yaml NS SCHEDULER COUNT GROUP_SIZE PART PARTS: a List of the pause pods
# whose index is PART modulo PARTS.
pods_yaml() {
  local ns=$1 sched=$2 count=$3 group=$4 part=$5 parts=$6 i
  echo "apiVersion: v1"
  echo "kind: List"
  echo "items:"
  for ((i = part; i < count; i += parts)); do
    local labels='bench: "1"'
    if [ "$group" -gt 0 ]; then labels="$labels, group: g$((i / group))"; fi
    cat <<POD
- apiVersion: v1
  kind: Pod
  metadata: {name: p$i, namespace: $ns, labels: {$labels}}
  spec:
    schedulerName: $sched
    containers: [{name: c, image: pause, resources: {requests: {cpu: 100m, memory: 64Mi}}}]
POD
  done
}

# create_pods NS SCHEDULER COUNT [GROUP]: four kubectl at once, as one is slow.
create_pods() {
  k create namespace "$1" >/dev/null
  local start part pids=()
  start=$(date +%s)
  for part in 0 1 2 3; do
    pods_yaml "$1" "$2" "$3" "${4:-0}" "$part" 4 >"$work/pods-$1-$part.yaml"
    k --request-timeout=0 create -f "$work/pods-$1-$part.yaml" >/dev/null &
    pids+=($!)
  done
  for part in "${pids[@]}"; do wait "$part"; done
  echo "bench: created $3 pods in $1 in $(($(date +%s) - start)) s"
}

wait_count() { # WHAT WANT SECONDS CMD...: polls CMD's number until >= WANT
  local what=$1 want=$2 secs=$3 i n=0
  shift 3
  for ((i = 0; i < secs; i++)); do
    n=$("$@")
    [ "$n" -ge "$want" ] && return 0
    sleep 1
  done
  echo "bench: $what: $n of $want after $secs s" >&2
  return 1
}
count_pods() { k get pods -n "$1" -o name 2>/dev/null | wc -l || true; }
count_podgroups() { k get podgroups.scheduling.volcano.sh -n "$1" -o name 2>/dev/null | wc -l || true; }

alone_config=$work/scheduler-alone.yaml
cat >"$alone_config" <<SC
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {leaderElect: false}
clientConnection: {kubeconfig: $KUBECONFIG, qps: ${TEPHRA_SCHEDULER_QPS:-5000}, burst: ${TEPHRA_SCHEDULER_QPS:-5000}}
profiles: [{schedulerName: default-scheduler, percentageOfNodesToScore: 100}]
SC
tephra_config=$cdir/scheduler-config.yaml

echo "bench: $(k get nodes --no-headers | wc -l) nodes; $bench_pods plain pods, $bench_gangs gangs of $gang_size"
stop_scheduler

# 1. plain pods, kube-scheduler alone
create_pods bench-plain-alone default-scheduler "$bench_pods"
start_scheduler "$alone_config"
measure "plain pods, kube-scheduler alone" bench-plain-alone "$bench_pods"
stop_scheduler

# 2. plain pods, kube-scheduler with tephra (each gets its own PodGroup from tephra)
create_pods bench-plain-tephra volcano "$bench_pods"
wait_count "PodGroups for plain pods" "$bench_pods" 600 count_podgroups bench-plain-tephra || true
start_scheduler "$tephra_config"
measure "plain pods, kube-scheduler + tephra extender" bench-plain-tephra "$bench_pods"
stop_scheduler

# 3. gangs, kube-scheduler alone (it knows no gangs: the same pods, grouped by label only)
create_pods bench-gang-alone default-scheduler "$((bench_gangs * gang_size))" "$gang_size"
start_scheduler "$alone_config"
measure "gangs of $gang_size, kube-scheduler alone" bench-gang-alone "$((bench_gangs * gang_size))"
stop_scheduler

# 4. gangs as vcJobs, kube-scheduler with tephra
k create namespace bench-gang-tephra >/dev/null
{
  for ((g = 0; g < bench_gangs; g++)); do
    cat <<JOB
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: g$g, namespace: bench-gang-tephra}
spec:
  minAvailable: $gang_size
  schedulerName: volcano
  tasks:
    - name: t
      replicas: $gang_size
      template:
        spec:
          restartPolicy: Never
          containers: [{name: c, image: pause, resources: {requests: {cpu: 100m, memory: 64Mi}}}]
---
JOB
  done
} >"$work/jobs.yaml"
start=$(date +%s)
k --request-timeout=0 create -f "$work/jobs.yaml" >/dev/null
wait_count "pods of the vcJobs" "$((bench_gangs * gang_size))" 900 count_pods bench-gang-tephra || true
echo "bench: $bench_gangs vcJobs and their pods created in $(($(date +%s) - start)) s"
start_scheduler "$tephra_config"
measure "gangs of $gang_size (vcJobs), kube-scheduler + tephra extender" bench-gang-tephra "$((bench_gangs * gang_size))"

echo "== benchmark: $(k get nodes --no-headers | wc -l) kwok nodes, kube-scheduler $k8s_version (client qps ${TEPHRA_SCHEDULER_QPS:-5000} for both)"
printf '%s\n' "${results[@]}"
