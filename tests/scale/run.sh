#!/usr/bin/env bash
# The scale harness: a loaded cluster on the real control plane (tests/cluster), then the
# same workloads for Volcano v1.14.1, for tephra + kube-scheduler and for the floor (a
# client that decides nothing), each target on a fresh control plane, one after the other
# in one run, with the accounting of tests/volcano-e2e/bench.sh (a watch on the pods
# stamped as events arrive; per process the CPU seconds of each workload and the peak
# resident memory).
#
# Usage: run.sh [--quick] [TARGET...]     TARGET: floor volcano tephra (default: all three)
#
# The cluster: NODES kwok nodes of 32 cpu, 256Gi, 110 pods, and EXISTING running pods
# (100m cpu each) created with their node already set, straight into the API. The first
# POOL nodes are the stream's pool and the next COLD the cold start's; EXISTING spreads
# over the rest. The workloads, in this order:
#   cold    (volcano, tephra) with a gang of 8 pods waiting on the cold nodes, which carry
#           no label yet, the target is stopped, the nodes labelled and the target started:
#           seconds until its caches are synced (tephra: /readyz answers 200; Volcano:
#           vc-scheduler's first session, which it opens only once its caches are synced)
#           and until the gang's first and last pod are bound.
#   gang    GANG_JOBS vcJobs x GANG_REPLICAS pods (1 cpu, minAvailable = replicas), all
#           submitted at once: when every pod exists, the first and last bind, pods/s.
#           The floor creates and binds the same number of pods itself.
#   stream  (volcano, tephra) small gangs (2, 4 or 8 pods of 1 cpu, `sleep 20`) arriving at
#           STREAM_RATE a second for STREAM_SECONDS in 10 queues of weight 1 on the pool
#           (offered load about 90 % of its cpu): per queue the time in queue (creation
#           to the gang's last bind) p50/p99, the pool's mean cpu held over the last 80 %
#           of the stream, and every job finished.
#   faults  (volcano, tephra) the stream again for FAULT_SECONDS at 70 % of the rate, with
#           one fault every sixth of it: the target SIGKILLed and restarted; two replicas
#           with the leader SIGKILLed (tephra; Volcano runs one replica of each here);
#           kube-apiserver SIGKILLed and restarted; etcd paused (SIGSTOP) for 10 s. Checked:
#           0 partial gangs, 0 pods lost or duplicated, every job Completed.
# Prints one table per workload; results, pod events, logs and /metrics stay in the output
# folder.
#
# Sizes (environment; --quick sets the small ones, for CI):
#                          default       --quick
#   SCALE_NODES            2000          60
#   SCALE_EXISTING         60000         1500
#   SCALE_GANG_JOBS        100           10
#   SCALE_GANG_REPLICAS    100           20
#   SCALE_POOL             40            4
#   SCALE_STREAM_SECONDS   600           45
#   SCALE_STREAM_RATE      12.3 (90 % of the pool)  1.23
#   SCALE_FAULT_SECONDS    300           150
#   SCALE_COLD             4             2
# SCALE_WORKLOADS picks which of cold, gang, stream and faults run (default: all four, in
# that order; e.g. SCALE_WORKLOADS="cold gang" measures those two alone).
# Other environment: SCALE_QPS (5000) and SCALE_BURST (10000), the targets' client limits;
# SCALE_OUT, the folder for the results (default: a new temp folder, kept); TEPHRA_BIN
# (default: cargo build --release of this checkout).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/volcano-e2e/lib.sh
. "$here/../volcano-e2e/lib.sh"

quick=0
if [ "${1:-}" = --quick ]; then
  quick=1
  shift
fi
if [ "$quick" = 1 ]; then
  d_nodes=60 d_existing=1500 d_jobs=10 d_replicas=20 d_pool=4 d_stream=45 d_fault=150 d_cold=2
else
  d_nodes=2000 d_existing=60000 d_jobs=100 d_replicas=100 d_pool=40 d_stream=600 d_fault=300 d_cold=4
fi
nodes=${SCALE_NODES:-$d_nodes}
existing=${SCALE_EXISTING:-$d_existing}
gang_jobs=${SCALE_GANG_JOBS:-$d_jobs}
gang_replicas=${SCALE_GANG_REPLICAS:-$d_replicas}
pool=${SCALE_POOL:-$d_pool}
cold_nodes=${SCALE_COLD:-$d_cold}
stream_seconds=${SCALE_STREAM_SECONDS:-$d_stream}
fault_seconds=${SCALE_FAULT_SECONDS:-$d_fault}
workloads=" ${SCALE_WORKLOADS:-cold gang stream faults} "
for w in $workloads; do
  case $w in cold | gang | stream | faults) ;; *) echo "run.sh: unknown workload $w (cold, gang, stream or faults)" >&2; exit 2 ;; esac
done
wants() { [[ $workloads == *" $1 "* ]]; }
node_cpu=32
# Offered load: a gang holds on average 14/3 cpu for 20 s; 90 % of the pool's cpu.
stream_rate=${SCALE_STREAM_RATE:-$(awk -v p="$pool" -v c="$node_cpu" 'BEGIN { printf "%.2f", 0.9 * p * c / (14 / 3 * 20) }')}
fault_rate=$(awk -v r="$stream_rate" 'BEGIN { printf "%.2f", 0.7 * r }')
qps=${SCALE_QPS:-5000}
burst=${SCALE_BURST:-10000}
for v in "$nodes" "$existing" "$gang_jobs" "$gang_replicas" "$pool" "$cold_nodes" "$stream_seconds" "$fault_seconds"; do
  [[ $v =~ ^[0-9]+$ ]] || { echo "run.sh: '$v' is not a whole number" >&2; exit 2; }
done
if [ $((pool + cold_nodes)) -ge "$nodes" ]; then
  echo "run.sh: SCALE_POOL + SCALE_COLD must leave nodes for the existing pods" >&2
  exit 2
fi
queues=(q0 q1 q2 q3 q4 q5 q6 q7 q8 q9)

# --- driver: each target in a child process of its own (own control plane, own cleanup) ---
if [ "${1:-}" != --one ]; then
  targets=("$@")
  [ "${#targets[@]}" -gt 0 ] || targets=(floor volcano tephra)
  for t in "${targets[@]}"; do
    case $t in floor | volcano | tephra) ;; *) echo "run.sh: unknown target $t (floor, volcano or tephra)" >&2; exit 2 ;; esac
  done
  if [[ " ${targets[*]} " == *" volcano "* ]]; then "$here/../volcano-e2e/build.sh" >&2; else "$cluster_dir/build.sh" >&2; fi
  vc_bench_tephra_bin "${targets[@]}"
  out=${SCALE_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/tephra-scale.XXXXXX")}
  mkdir -p "$out"
  echo "== scale: $nodes nodes, $existing existing pods; gang $gang_jobs x $gang_replicas; stream ${stream_seconds} s at $stream_rate/s on $pool nodes; faults ${fault_seconds} s" >&2
  one_args=()
  [ "$quick" = 0 ] || one_args=(--quick)
  rc=0
  for t in "${targets[@]}"; do
    echo "== $t ($(date -u +%T), load average $(cut -d' ' -f1-3 /proc/loadavg))" >&2
    start=$(date +%s)
    if ! "$0" ${one_args[@]+"${one_args[@]}"} --one "$t" "$out/$t"; then
      echo "run.sh: the $t run failed (logs in $out/$t)" >&2
      rc=1
    fi
    echo "== $t took $(($(date +%s) - start)) s in all" >&2
  done
  python3 "$here/report.py" "$out" "${targets[@]}" || rc=1
  exit "$rc"
fi

# --- one target -------------------------------------------------------------------
target=$2 tout=$3
mkdir -p "$tout"
# Volcano's source (its CRDs and chart) only for Volcano: CI runs floor and tephra alone.
vc_src=""
[ "$target" != volcano ] || vc_src=$(vc_source_dir)
work=$(mktemp -d "${TMPDIR:-/tmp}/tephra-scale-work.XXXXXX")
tephra_pid="" cluster_up=0 watch_pid="" proxy_pid=""
# Processes started again after a fault (in a background function) leave their pid in
# $work/pids/NAME; all of them are stopped at the end with the rest.
scale_cleanup() {
  local rc=$? f
  set +e
  [ -z "$proxy_pid" ] || stop_pid "$proxy_pid"
  for f in "$work"/pids/*; do [ -e "$f" ] && stop_pid "$(cat "$f")"; done
  (exit "$rc")
  vc_bench_cleanup
}
trap scale_cleanup EXIT
k() { kubectl --request-timeout=20s "$@"; }
scale() { python3 "$here/scale.py" "$@"; }
now() { echo "$EPOCHREALTIME"; }
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.3f", b - a }'; }
say() { echo "run.sh [$target $(date -u +%T)]: $*" >&2; }

export TEPHRA_NODE_CPU=$node_cpu TEPHRA_NODE_MEMORY=256Gi TEPHRA_NODE_PODS=110
export TEPHRA_SCHEDULER_QPS=$qps
# Pods end as their `sleep N` would (the stream's gangs run 20 s); `sleep infinity` runs on.
export TEPHRA_KWOK_EXTRA_CONFIG=$here/../volcano-e2e/kwok-stages.yaml
export TEPHRA_READY_TIMEOUT=300
mkdir -p "$work/sched-conf" "$work/pids"
sched_conf=$work/sched-conf/volcano-scheduler.conf
vc_bench_sched_conf "$sched_conf"
vc_bench_tephra_sa=0

if [ "$target" = floor ]; then
  TEPHRA_CLUSTER_DIR="$work/cluster" "$cluster_dir/up.sh" "$nodes" >/dev/null
  cluster_up=1
  export KUBECONFIG="$work/cluster/kubeconfig"
else
  vc_bench_up "$target" "$vc_src" "$sched_conf"
fi
say "control plane up with $nodes nodes"

# procs: the target's processes and the control plane's, NAME:PID (again after a restart).
account() {
  local n
  procs=()
  if [ "$target" = tephra ]; then
    procs+=("tephra:$tephra_pid" "kube-scheduler:$(cat "$work/cluster/pids/kube-scheduler.pid")")
  elif [ "$target" = volcano ]; then
    for n in vc-scheduler vc-controller-manager vc-webhook-manager; do procs+=("$n:${vc_pid_of[$n]}"); done
  fi
  for n in kube-apiserver etcd kube-controller-manager kwok; do procs+=("$n:$(cat "$work/cluster/pids/$n.pid")"); done
}
account

# --- the load: existing pods, the pool's label --------------------------------------
say "creating $existing existing pods"
scale existing "$KUBECONFIG" "$existing" $((pool + cold_nodes)) $((nodes - 1)) >"$tout/existing" \
  || { say "loading the existing pods failed"; exit 1; }
cat "$tout/existing" >&2
pool_names=()
for ((i = 0; i < pool; i++)); do pool_names+=("kwok-node-$i"); done
k label nodes "${pool_names[@]}" scale.tephra.test/pool=stream >/dev/null
{
  echo "nodes=$nodes"
  echo "existing=$existing"
  echo "gang_jobs=$gang_jobs"
  echo "gang_replicas=$gang_replicas"
  echo "pool=$pool"
  echo "load_after_existing=$(cut -d' ' -f1-3 /proc/loadavg)"
} >"$tout/cluster"

# podwatch NAMESPACE FILE SECONDS [MODE]: a pod watch in the background (watch_pid).
podwatch() {
  : >"$2"
  python3 "$here/../volcano-e2e/podwatch.py" "$KUBECONFIG" "$1" "" "$2" "$3" ${4:+"$4"} 2>>"$work/podwatch.log" &
  watch_pid=$!
  sleep 1
}
stop_watch() {
  [ -z "$watch_pid" ] || stop_pid "$watch_pid"
  watch_pid=""
}
# bound FILE: how many pods the events of FILE show bound.
bound() { awk 'NF >= 3 && $3 != "" && $3 != "-" { b[$2] = 1 } END { print length(b) }' "$1"; }
# empty NAMESPACE SECONDS: deletes every vcJob, PodGroup and pod of NAMESPACE and waits until none is left.
# The pods go in delete-collection requests (kubectl's --all deletes them one by one: minutes
# for ten thousand); kube-apiserver ends one after its request timeout (a minute) with part of
# the pods deleted, so another follows while pods are left.
empty() {
  k delete jobs.batch.volcano.sh --all -n "$1" --wait=false >/dev/null 2>&1 || true
  # A job's PodGroup goes with it only once the garbage collector gets to it, and a waiting
  # gang's PodGroup (no pods yet) would go on holding its place in the queues.
  k delete podgroups.scheduling.volcano.sh --all -n "$1" --wait=false >/dev/null 2>&1 || true
  local until=$((SECONDS + $2)) pg=/apis/scheduling.volcano.sh/v1beta1/namespaces/$1/podgroups out
  while [ "$SECONDS" -lt "$until" ]; do
    if k get --raw "/api/v1/namespaces/$1/pods?limit=1" 2>/dev/null | grep -q '"items":\[\]'; then
      # The floor's cluster has no PodGroup resource at all: nothing to wait for.
      out=$(k get --raw "$pg?limit=1" 2>&1) || [[ $out != *NotFound* ]] || return 0
      grep -q '"items":\[\]' <<<"$out" && return 0
      kubectl --request-timeout=90s delete --raw "$pg" >/dev/null 2>&1 || true
    else
      kubectl --request-timeout=90s delete --raw "/api/v1/namespaces/$1/pods" >/dev/null 2>&1 || true
    fi
    sleep 1
  done
  say "pods or PodGroups of $1 still there after $2 s"
  return 1
}
# tephra's replicas in the fault run: ports and pids by replica (a, b).
declare -A rep_port=() rep_metrics=() rep_pid=()
metrics_to() {
  mkdir -p "$1"
  if [ "$target" = floor ]; then return 0; fi
  # With two replicas, the leader's series.
  if [ -n "${rep_metrics[a]:-}" ]; then
    if leads b; then metrics_port=${rep_metrics[b]}; else metrics_port=${rep_metrics[a]}; fi
  fi
  vc_bench_metrics "$target" "$1"
}

# Volcano's three restarted as they were started (saved command lines).
declare -A vc_cmd=()
save_vc_cmds() {
  local n
  for n in vc-scheduler vc-controller-manager vc-webhook-manager; do
    vc_cmd[$n]=$(tr '\0' '\037' <"/proc/${vc_pid_of[$n]}/cmdline")
  done
}
restart_vc() {
  local n=$1 args
  IFS=$'\037' read -r -a args <<<"${vc_cmd[$n]}"
  "${args[@]}" >>"$work/$n.log" 2>&1 &
  vc_pid_of[$n]=$!
  echo $! >"$work/pids/$n"
  disown "$!"
}
vc_sessions() {
  curl -sf "http://$vc_scheduler_metrics/metrics" 2>/dev/null \
    | awk '/^volcano_e2e_scheduling_latency_milliseconds_count/ { n += $2 } END { print n + 0 }'
}

# --- (a) cold start ----------------------------------------------------------------------
if [ "$target" != floor ] && wants cold; then
  k create namespace scale-cold >/dev/null
  cat >"$work/cold.yaml" <<JOB
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: cold, namespace: scale-cold}
spec:
  schedulerName: volcano
  minAvailable: 8
  queue: default
  tasks:
  - name: w
    replicas: 8
    template:
      spec:
        schedulerName: volcano
        nodeSelector: {scale.tephra.test/pool: cold}
        tolerations: [{key: kwok.x-k8s.io/node, operator: Exists, effect: NoSchedule}]
        containers:
        - name: main
          image: busybox:1.36
          command: ["/bin/sh", "-c", "sleep infinity"]
          resources: {requests: {cpu: "1", memory: 1Gi}}
JOB
  k create -f "$work/cold.yaml" >/dev/null
  cold_pods() { [ "$(k get pods -n scale-cold -o name | wc -l)" -ge 8 ]; }
  wait_until 120 cold_pods || { say "the cold gang's pods were not created"; exit 1; }
  if [ "$target" = tephra ]; then
    stop_tephra
  else
    save_vc_cmds
    for n in vc-scheduler vc-controller-manager vc-webhook-manager; do stop_pid "${vc_pid_of[$n]}"; done
  fi
  cold_names=()
  for ((i = pool; i < pool + cold_nodes; i++)); do cold_names+=("kwok-node-$i"); done
  k label nodes "${cold_names[@]}" scale.tephra.test/pool=cold >/dev/null
  podwatch scale-cold "$work/cold-events" 600
  t0=$(now)
  ready_s=""
  if [ "$target" = tephra ]; then
    start_tephra
    ready_s=$(since "$t0")
  else
    for n in vc-webhook-manager vc-controller-manager vc-scheduler; do restart_vc "$n"; done
  fi
  first_s="" all_s=""
  for ((i = 0; i < 3000; i++)); do
    if [ -z "$ready_s" ] && [ "$(vc_sessions)" -gt 0 ]; then ready_s=$(since "$t0"); fi
    b=$(bound "$work/cold-events")
    if [ -z "$first_s" ] && [ "$b" -gt 0 ]; then first_s=$(since "$t0"); fi
    if [ "$b" -ge 8 ]; then all_s=$(since "$t0"); break; fi
    sleep 0.1
  done
  stop_watch
  # The bind times from the events themselves (the poll above is only when it noticed).
  {
    echo "ready_s=$ready_s"
    awk -v t0="$t0" 'NF >= 3 && $3 != "-" && !($2 in b) { b[$2] = $1 }
      END { n = 0; for (p in b) { n++; if (!f || b[p] < f) f = b[p]; if (b[p] > l) l = b[p] }
            if (n) printf "first_bind_s=%.3f\n", f - t0; if (n >= 8) printf "all_bound_s=%.3f\n", l - t0; printf "bound=%d\n", n }' \
      "$work/cold-events"
    echo "noticed_first_s=$first_s"
    echo "noticed_all_s=$all_s"
  } >"$tout/cold"
  account
  cat "$tout/cold" >&2
  empty scale-cold 120 || true
fi

# --- (b) the gang case --------------------------------------------------------------------
if wants gang; then
  k create namespace scale-gang >/dev/null 2>&1 || true
  total=$((gang_jobs * gang_replicas))
  say "gang case: $gang_jobs x $gang_replicas"
  load_start=$(cut -d' ' -f1-3 /proc/loadavg)
  vc_bench_cpu_start
  if [ "$target" = floor ]; then
    t0=$(now)
    scale floor "$KUBECONFIG" "$gang_jobs" "$gang_replicas" 0 $((nodes - 1)) >"$work/gang-result"
    cpu_window_s=$(since "$t0")
  else
    for ((j = 1; j <= gang_jobs; j++)); do
      cat <<JOB
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: gang-$j, namespace: scale-gang}
spec:
  schedulerName: volcano
  minAvailable: $gang_replicas
  queue: default
  tasks:
  - name: worker
    replicas: $gang_replicas
    template:
      spec:
        schedulerName: volcano
        nodeSelector: {type: kwok}
        tolerations: [{key: kwok.x-k8s.io/node, operator: Exists, effect: NoSchedule}]
        containers:
        - name: worker
          image: busybox:1.36
          command: ["/bin/sh", "-c", "sleep infinity"]
          resources:
            requests: {cpu: "1", memory: 1Gi}
            limits: {cpu: "1", memory: 1Gi}
---
JOB
    done >"$work/jobs.yaml"
    podwatch scale-gang "$work/gang-events" 1800
    t0=$(now)
    vc_bench_submit "$work/jobs.yaml" || say "creating vcJobs failed: $(tail -n 3 "$work/create.log")"
    result="NOT DONE"
    for ((i = 0; i < 2400; i++)); do
      [ "$(bound "$work/gang-events")" -ge "$total" ] && { result=DONE; break; }
      sleep 0.5
    done
    cpu_window_s=$(since "$t0")
    stop_watch
    {
      echo "result=$result"
      echo "total=$total"
      echo "bound=$(bound "$work/gang-events")"
      vc_bench_bind_times "$t0" "$total" "$work/gang-events"
    } >"$work/gang-result"
  fi
  {
    cat "$work/gang-result"
    echo "load_start=$load_start"
    echo "load_end=$(cut -d' ' -f1-3 /proc/loadavg)"
    echo "cpu_window_s=$cpu_window_s"
    vc_bench_proc_lines proc
  } >"$tout/gang"
  metrics_to "$tout/metrics-gang"
  cat "$work/gang-result" >&2
  empty scale-gang 600 || true
fi

# --- (c) the stream and (d) the faults ------------------------------------------------------------
if [ "$target" != floor ] && { wants stream || wants faults; }; then
  for q in "${queues[@]}"; do
    printf 'apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {name: %s}\nspec: {weight: 1}\n---\n' "$q"
  done >"$work/queues.yaml"
  k create -f "$work/queues.yaml" >/dev/null
  queues_open() {
    local q
    for q in "${queues[@]}"; do [ "$(k get queue "$q" -o jsonpath='{.status.state}')" = Open ] || return 1; done
  }
  wait_until 60 queues_open || { say "the queues were not Open after 60 s"; exit 1; }
  queue_list=$(IFS=,; echo "${queues[*]}")

  # run_stream NAME RATE SECONDS [FAULTS_FN]: one stream into namespace scale-NAME; results in
  # $tout/NAME. FAULTS_FN runs beside it, given the stream's length; then every job has up
  # to 300 s to finish. Without faults, the CPU and memory of each process too.
  run_stream() {
    local name=$1 rate=$2 secs=$3 faults=${4:-} ns=scale-$1 fpid="" finish=300
    k create namespace "$ns" >/dev/null
    podwatch "$ns" "$work/$name-events" $((secs + finish + 60)) full
    load_start=$(cut -d' ' -f1-3 /proc/loadavg)
    vc_bench_cpu_start
    t0=$(now)
    if [ -n "$faults" ]; then
      "$faults" "$secs" >"$work/$name-faults" 2>>"$work/faults.log" &
      fpid=$!
    fi
    scale stream "$KUBECONFIG" "$ns" "$queue_list" "$rate" "$secs" "$work/$name-jobs" "$name" >"$work/$name-submit"
    [ -z "$fpid" ] || wait "$fpid" || say "the faults of $name did not all run"
    # Every job done (Completed, Failed, ...) or $finish s more (a deadline, not a count of
    # polls: listing thousands of vcJobs on a saturated kube-apiserver takes seconds).
    local phases="" finish_by=$((SECONDS + finish))
    while [ "$SECONDS" -lt "$finish_by" ]; do
      phases=$(scale jobs "$KUBECONFIG" "$ns" 2>/dev/null || true)
      if [ -n "$phases" ] && ! grep -qvE '^(Completed|Failed|Aborted|Terminated) ' <<<"$phases"; then break; fi
      sleep 2
    done
    local run_s
    run_s=$(since "$t0")
    stop_watch
    {
      cat "$work/$name-submit"
      scale stream-report "$work/$name-events" "$work/$name-jobs" $((pool * node_cpu)) "$t0" \
        "$(awk -v s="$secs" 'BEGIN { printf "%d", s / 5 }')" "$secs"
      echo "phases=$(tr '\n' ',' <<<"$phases" | sed 's/,$//')"
      echo "completed=$(awk '$1 == "Completed" { print $2 }' <<<"$phases")"
      echo "run_s=$run_s"
      echo "rate=$rate"
      echo "seconds=$secs"
      echo "load_start=$load_start"
      echo "load_end=$(cut -d' ' -f1-3 /proc/loadavg)"
      [ ! -s "$work/$name-faults" ] || cat "$work/$name-faults"
      # After a fault the processes killed are others than those counted at the start.
      [ -n "$faults" ] || vc_bench_proc_lines proc
    } >"$tout/$name"
    cp "$work/$name-events" "$tout/$name-events.txt"
    metrics_to "$tout/metrics-$name"
    grep -E '^(jobs|started|partial_gangs|pods_lost|pods_duplicated|wait_all|util_pct|phases)=' "$tout/$name" >&2
  }

  if wants stream; then
    say "stream: ${stream_seconds} s at $stream_rate/s"
    run_stream stream "$stream_rate" "$stream_seconds"
    empty scale-stream 300 || true
  fi

  # The faults, one every sixth of the stream; each prints "fault_N=WHAT at S s: OUTCOME".
  api_restart() {
    local pidf=$work/cluster/pids/kube-apiserver.pid args
    IFS=$'\037' read -r -a args <<<"$(tr '\0' '\037' <"/proc/$(cat "$pidf")/cmdline")"
    kill -9 "$(cat "$pidf")"
    sleep 1
    "${args[@]}" >>"$work/cluster/logs/kube-apiserver.log" 2>&1 &
    echo $! >"$pidf"
    wait_until 120 k get --raw /readyz
  }
  etcd_pause() {
    local pid
    pid=$(cat "$work/cluster/pids/etcd.pid")
    kill -STOP "$pid"
    sleep 10
    kill -CONT "$pid"
  }
  # tephra behind the proxy: replica A, then B; the proxy follows the leader.
  start_replica() {
    local r=$1
    "$TEPHRA_BIN" serve --kubeconfig "$work/tephra.kubeconfig" \
      --listen "127.0.0.1:${rep_port[$r]}" --metrics-listen "127.0.0.1:${rep_metrics[$r]}" \
      --tls-cert "$work/tls/tls.crt" --tls-key "$work/tls/tls.key" \
      "${tephra_serve_args[@]/--leader-elect=false/--leader-elect=true}" --leader-elect-namespace tephra-system \
      >>"$work/tephra-$r.log" 2>&1 &
    rep_pid[$r]=$!
    echo $! >"$work/pids/tephra-$r"
    # Killing it is the point: no "Killed" line from this shell.
    disown "$!"
  }
  # gone PID: the process has exited (a zombie not yet reaped counts: its sockets are closed).
  gone() { [ ! -e "/proc/$1" ] || [ "$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null)" = Z ]; }
  # kill_replica R: SIGKILL, then wait until it is gone, so its ports are free for the next.
  kill_replica() {
    kill -9 "${rep_pid[$1]}"
    wait_until 10 gone "${rep_pid[$1]}" || true
  }
  # grep reads the whole page: `grep -q` would stop at the match and, with pipefail, curl's
  # write error on the rest of a large page (hundreds of KiB at 2,000 nodes) would fail it.
  leads() { curl -sf "http://127.0.0.1:${rep_metrics[$1]}/metrics" | grep '^tephra_leader_is_leader 1$' >/dev/null; }
  ready() { curl -sf "http://127.0.0.1:${rep_metrics[$1]}/readyz" >/dev/null; }
  leader_of() { if leads a; then echo a; elif leads b; then echo b; fi; }
  at() { sleep "$(awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { d = a - b; printf "%.3f", (d > 0 ? d : 0) }')"; }
  tephra_faults() {
    local secs=$1 t0f=$EPOCHREALTIME step s tk l other
    step=$(awk -v s="$secs" 'BEGIN { printf "%.3f", s / 6 }')
    at "$(awk -v a="$t0f" -v d="$step" 'BEGIN { printf "%.3f", a + d }')"
    s=$(since "$t0f") tk=$EPOCHREALTIME
    kill_replica a
    start_replica a
    wait_until 120 leads a && echo "fault_1=tephra SIGKILLed at ${s} s and started again: leading $(since "$tk") s after the kill" \
      || echo "fault_1=tephra SIGKILLed at ${s} s and started again: NOT leading within 120 s"
    start_replica b
    wait_until 60 ready b || true
    at "$(awk -v a="$t0f" -v d="$step" 'BEGIN { printf "%.3f", a + 2 * d }')"
    s=$(since "$t0f") tk=$EPOCHREALTIME
    l=$(leader_of)
    other=$([ "$l" = a ] && echo b || echo a)
    [ -n "$l" ] || { echo "fault_2=no replica leading at ${s} s: not run"; plane_faults "$t0f" "$step"; return; }
    kill_replica "$l"
    if wait_until 120 leads "$other"; then
      echo "fault_2=the leader of two replicas SIGKILLed at ${s} s: the other leading $(since "$tk") s after the kill"
    else
      echo "fault_2=the leader of two replicas SIGKILLed at ${s} s: NO new leader within 120 s"
    fi
    start_replica "$l"
    plane_faults "$t0f" "$step"
  }
  # plane_faults T0 STEP: faults 3 and 4, the control plane's, at T0 + 3 and 4 STEPs.
  plane_faults() {
    local t0f=$1 step=$2 s tk
    at "$(awk -v a="$t0f" -v d="$step" 'BEGIN { printf "%.3f", a + 3 * d }')"
    s=$(since "$t0f") tk=$EPOCHREALTIME
    api_restart && echo "fault_3=kube-apiserver SIGKILLed at ${s} s and started again: ready $(since "$tk") s after the kill" \
      || echo "fault_3=kube-apiserver SIGKILLed at ${s} s and started again: NOT ready within 120 s"
    at "$(awk -v a="$t0f" -v d="$step" 'BEGIN { printf "%.3f", a + 4 * d }')"
    s=$(since "$t0f")
    etcd_pause
    echo "fault_4=etcd paused 10 s at ${s} s"
  }
  volcano_faults() {
    local secs=$1 t0f=$EPOCHREALTIME step s n
    step=$(awk -v s="$secs" 'BEGIN { printf "%.3f", s / 6 }')
    at "$(awk -v a="$t0f" -v d="$step" 'BEGIN { printf "%.3f", a + d }')"
    s=$(since "$t0f")
    for n in vc-scheduler vc-controller-manager; do
      kill -9 "${vc_pid_of[$n]}"
      wait "${vc_pid_of[$n]}" 2>/dev/null || true
      restart_vc "$n"
    done
    echo "fault_1=vc-scheduler and vc-controller-manager SIGKILLed at ${s} s and restarted"
    echo "fault_2=two replicas with the leader killed: not run (Volcano runs one replica of each here)"
    plane_faults "$t0f" "$step"
  }

  if ! wants faults; then
    :
  elif [ "$target" = tephra ]; then
    # From here tephra runs with leader election behind the proxy, as two replicas would run
    # behind their Services.
    stop_tephra
    read -r pa pb ma mb < <(free_ports 4)
    rep_port=([a]=$pa [b]=$pb) rep_metrics=([a]=$ma [b]=$mb)
    python3 "$here/scale.py" proxy "$tephra_port" "$pa:$ma" "$pb:$mb" >>"$work/proxy.log" 2>&1 &
    proxy_pid=$!
    start_replica a
    wait_until 120 leads a || { say "replica a did not lead"; tail -n 20 "$work/tephra-a.log" >&2; exit 1; }
    account
    say "faults: ${fault_seconds} s at $fault_rate/s"
    run_stream faults "$fault_rate" "$fault_seconds" tephra_faults
    # The replicas are in $work/pids, stopped with the rest.
    tephra_pid=""
  else
    save_vc_cmds
    say "faults: ${fault_seconds} s at $fault_rate/s"
    run_stream faults "$fault_rate" "$fault_seconds" volcano_faults
  fi
fi
say "done"
