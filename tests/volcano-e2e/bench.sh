#!/usr/bin/env bash
# Volcano's benchmark gang case (benchmark/testcases/gang on Volcano's master,
# `make test-gang-env`), side by side: Volcano v1.14.1 against tephra +
# kube-scheduler, each on a fresh loopback control plane of tests/cluster, one
# after the other in one run of this script.
#
# Usage: bench.sh [TARGET...]     TARGET: volcano tephra tephra-native (default: volcano
#                                 tephra, in that order)
#
# The case: kwok nodes (Volcano's default 100 × 32 cpu, 256Gi, 110 pods), the
# case's scheduler configuration (actions enqueue, allocate, backfill; plugins
# priority, gang, conformance | overcommit, drf, predicates, proportion,
# nodeorder, binpack) and JOBS vcJobs of queue `default`, each one task
# `worker` of REPLICAS pods (1 cpu, 1Gi, busybox `sleep 30`, nodeSelector
# type=kwok) with minAvailable MIN_AVAILABLE, all submitted at once.
#   volcano: vc-scheduler, vc-controller-manager, vc-webhook-manager out of
#            cluster as `run.sh --target volcano` installs them, the scheduler
#            and controller with the benchmark's client limits (qps 5000, burst 10000)
#   tephra:  `tephra serve` (release build) + kube-scheduler with tephra as its
#            extender, installed as `run.sh --target tephra` does (kube-scheduler
#            client qps = burst = VC_BENCH_QPS); like Volcano's three here, one
#            replica with --leader-elect=false
#   tephra-native: the same tephra with --gang-engine native: the cluster's
#            kube-scheduler (default profile, same client limits) places the gangs
#            with Kubernetes 1.37's gang scheduling, no extender
# Measured per target, from the submission of the vcJobs: when every pod
# exists, when the first and the last pod is bound to a node (a watch on the
# pods, stamped as each event arrives), pods/s (pods bound over the time to the
# last bind), and per process the CPU seconds used in that window (utime +
# stime from /proc/PID/stat) and the peak resident memory (VmHWM from
# /proc/PID/status, since the process started), with the resident memory at
# the end and how much of it is file-backed (RssFile: the binary's pages read
# so far, which any process sharing the file would share). A target that has not bound
# every pod within VC_BENCH_TIMEOUT, or whose processes exited, is reported
# NOT DONE with its counts.
# Prints one table per target pair; results, logs and the schedulers' /metrics
# stay in the output folder.
#
# Environment:
#   VC_BENCH_NODES (100), VC_BENCH_NODE_CPU (32), VC_BENCH_NODE_MEMORY (256Gi)
#   VC_BENCH_JOBS (10), VC_BENCH_REPLICAS (100), VC_BENCH_MIN_AVAILABLE (= REPLICAS)
#   VC_BENCH_POD_CPU (1), VC_BENCH_POD_MEMORY (1Gi)
#   VC_BENCH_QPS (5000), VC_BENCH_BURST (10000): the schedulers' and controllers' client limits
#   VC_BENCH_TIMEOUT     seconds per target from submission to the last bind (default 600)
#   VC_BENCH_OUT         folder for results and logs (default: a new temp folder, kept)
#   VC_BENCH_TEPHRA_SA=1 tephra keeps its service account's token (manifests/rbac.yaml), as
#                        deployed; by default it uses the admin kubeconfig like Volcano's
#                        three here, so API Priority and Fairness treats both alike (a
#                        service account's requests share the `workload-low` level)
#   TEPHRA_BIN           tephra binary (default: cargo build --release of this checkout)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/volcano-e2e/lib.sh
. "$here/lib.sh"

nodes=${VC_BENCH_NODES:-100}
jobs=${VC_BENCH_JOBS:-10}
replicas=${VC_BENCH_REPLICAS:-100}
min_available=${VC_BENCH_MIN_AVAILABLE:-$replicas}
pod_cpu=${VC_BENCH_POD_CPU:-1}
pod_memory=${VC_BENCH_POD_MEMORY:-1Gi}
qps=${VC_BENCH_QPS:-5000}
burst=${VC_BENCH_BURST:-10000}
timeout=${VC_BENCH_TIMEOUT:-600}
total=$((jobs * replicas))
ns=default

# --- driver: each target in a child process of its own (own control plane, own cleanup) ---
if [ "${1:-}" != --one ]; then
  targets=("$@")
  [ "${#targets[@]}" -gt 0 ] || targets=(volcano tephra)
  for t in "${targets[@]}"; do
    case $t in volcano | tephra | tephra-native) ;; *) echo "bench.sh: unknown target $t (volcano, tephra or tephra-native)" >&2; exit 2 ;; esac
  done
  "$here/build.sh" >&2
  vc_bench_tephra_bin "${targets[@]}"
  out=${VC_BENCH_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/volcano-bench.XXXXXX")}
  mkdir -p "$out"
  for t in "${targets[@]}"; do
    echo "== $t ($(date -u +%T), load average $(cut -d' ' -f1-3 /proc/loadavg))" >&2
    "$0" --one "$t" "$out/$t" || echo "bench.sh: the $t run failed (logs in $out/$t)" >&2
  done
  python3 - "$out" "${targets[@]}" <<'PY'
import sys, os
out, targets = sys.argv[1], sys.argv[2:]
def load(t):
    path = os.path.join(out, t, "result")
    if not os.path.exists(path):
        return None
    r = {"proc": []}
    for line in open(path):
        key, _, val = line.rstrip("\n").partition("=")
        if key == "proc":
            r["proc"].append(val.split())
        else:
            r[key] = val
    return r
res = {t: load(t) for t in targets}
first = next((r for r in res.values() if r), None)
if first:
    print(f"== Volcano's gang case: {first['jobs']} vcJobs x {first['replicas']} pods (minAvailable "
          f"{first['min_available']}, {first['pod_cpu']} cpu, {first['pod_memory']} each) on "
          f"{first['nodes']} kwok nodes x {first['node_cpu']} cpu, {first['node_memory']}")
print(f"{'target':13} {'result':9} {'bound':>11} {'all created':>12} {'first bound':>12} {'all bound':>10} {'pods/s':>7}  load average (start / end)")
def secs(r, k):
    v = r.get(k, "")
    return f"{float(v):.1f} s" if v else "-"
for t in targets:
    r = res[t]
    if not r:
        print(f"{t:13} FAILED    (no result; see {os.path.join(out, t)})")
        continue
    rate = f"{float(r['rate']):.0f}" if r.get("rate") else "-"
    print(f"{t:13} {r['result']:9} {r['bound'] + '/' + r['total']:>11} {secs(r, 'created_s'):>12} "
          f"{secs(r, 'first_bound_s'):>12} {secs(r, 'all_bound_s'):>10} {rate:>7}  {r['load_start']} / {r['load_end']}")
for t in targets:
    if res[t]:
        print(f"{t}: API identity {res[t].get('identity', '?')}")
print()
print(f"{'target':13} {'process':24} {'CPU s':>7} {'peak RSS MiB':>13} {'RSS at end MiB':>15} {'of which file-backed':>21}")
groups = {"volcano": ("vc-scheduler", "vc-controller-manager", "vc-webhook-manager"),
          "tephra": ("tephra", "kube-scheduler"),
          "tephra-native": ("tephra", "kube-scheduler")}
for t in targets:
    r = res[t]
    if not r:
        continue
    sums = [0.0, 0.0, 0.0, 0.0]
    has_file = False  # results written before the file-backed column have none
    for name, cpu, hwm, rss, *file in r["proc"]:
        if cpu == "exited":
            print(f"{t:13} {name:24} {'(exited before the end)':>37}")
            continue
        filed = f"{float(file[0]):21.0f}" if file and file[0] != "-" else f"{'-':>21}"
        print(f"{t:13} {name:24} {float(cpu):7.2f} {float(hwm):13.0f} {float(rss):15.0f} {filed}")
        if name in groups.get(t, ()):
            fb = float(file[0]) if file and file[0] != "-" else 0.0
            has_file = has_file or bool(file and file[0] != "-")
            sums = [sums[0] + float(cpu), sums[1] + float(hwm), sums[2] + float(rss), sums[3] + fb]
    label = " + ".join(groups.get(t, ()))
    print(f"{t:13} {'= ' + ('Volcano' if t == 'volcano' else 'tephra side'):24} {sums[0]:7.2f} {sums[1]:13.0f} {sums[2]:15.0f} {(f'{sums[3]:.0f}' if has_file else '-'):>21}   ({label})")
for t in targets:
    r = res[t]
    if r and r.get("notes"):
        print(f"{t}: {r['notes']}")
# Where the time went, from the schedulers' own series (the whole life of each process).
def metrics(path):
    series = {}
    if not os.path.exists(path):
        return series
    for line in open(path):
        if line.startswith("#") or not line.strip():
            continue
        name_labels, _, value = line.rstrip("\n").rpartition(" ")
        try:
            series[name_labels] = float(value)
        except ValueError:
            pass
    return series
def pick(series, prefix):
    return {k: v for k, v in series.items() if k.startswith(prefix)}
def mean_ms(series, name, scale):
    out_ = []
    for k, total in pick(series, name + "_sum").items():
        count = series.get(k.replace("_sum", "_count", 1), 0)
        if count:
            out_.append(f"{k[len(name) + 4:] or 'all'} {int(count)} x {total / count * scale:.1f} ms")
    return "; ".join(out_) or "-"
for t in targets:
    d = os.path.join(out, t)
    if t == "volcano":
        m = metrics(os.path.join(d, "vc-scheduler.metrics"))
        print(f"volcano: vc-scheduler sessions: {mean_ms(m, 'volcano_e2e_scheduling_latency_milliseconds', 1)}")
    else:
        m = metrics(os.path.join(d, "tephra.metrics"))
        ks = metrics(os.path.join(d, "kube-scheduler.metrics"))
        print(f"tephra: sessions: {mean_ms(m, 'volcano_e2e_scheduling_latency_milliseconds', 1)}")
        print(f"tephra: extender requests (mean time): {mean_ms(m, 'tephra_extender_request_duration_seconds', 1000)}")
        print("tephra: extender answers: " + ", ".join(f"{k.split('{', 1)[1][:-1]} {int(v)}" for k, v in pick(m, "tephra_extender_requests_total{").items()))
        print("tephra: gang binds: " + ", ".join(f"{k.split('{', 1)[1][:-1]} {int(v)}" for k, v in pick(m, "tephra_extender_gang_binds_total{").items()))
        print("tephra: kube-scheduler attempts: " + ", ".join(f"{k.split('{', 1)[1][:-1]} {int(v)}" for k, v in pick(ks, "scheduler_schedule_attempts_total{").items() if v))
print(f"results, logs and /metrics: {out}")
PY
  exit 0
fi

# --- one target -------------------------------------------------------------------
target=$2 tout=$3
mkdir -p "$tout"
if [ "$target" = tephra-native ]; then
  # tephra with the native engine; a second kube-scheduler runs the default profile.
  target=tephra vc_bench_engine=native
  export TEPHRA_DEFAULT_SCHEDULER=1
fi
vc_src=$(vc_source_dir)
work=$(mktemp -d "${TMPDIR:-/tmp}/volcano-bench-work.XXXXXX")
tephra_pid="" cluster_up=0 watch_pid=""
trap vc_bench_cleanup EXIT
k() { kubectl --request-timeout=20s "$@"; }

export TEPHRA_NODE_CPU=${VC_BENCH_NODE_CPU:-32} TEPHRA_NODE_MEMORY=${VC_BENCH_NODE_MEMORY:-256Gi}
export TEPHRA_SCHEDULER_QPS=$qps
mkdir -p "$work/sched-conf"
sched_conf=$work/sched-conf/volcano-scheduler.conf
vc_bench_sched_conf "$sched_conf"

vc_bench_tephra_sa=${VC_BENCH_TEPHRA_SA:-0}
vc_bench_up "$target" "$vc_src" "$sched_conf"

# The processes to account, NAME:PID.
vc_bench_procs "$target"

# The vcJobs, as the case's vcjob template renders them.
{
  for ((j = 1; j <= jobs; j++)); do
    cat <<JOB
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: gang-test-$j
  namespace: $ns
  labels: {volcano.sh/benchmark: "true"}
spec:
  schedulerName: volcano
  minAvailable: $min_available
  queue: default
  tasks:
  - name: worker
    replicas: $replicas
    template:
      metadata:
        labels: {volcano.sh/benchmark: "true"}
      spec:
        schedulerName: volcano
        containers:
        - name: worker
          image: busybox:1.36
          imagePullPolicy: IfNotPresent
          command: ["/bin/sh", "-c", "sleep 30"]
          resources:
            requests: {cpu: "$pod_cpu", memory: $pod_memory}
            limits: {cpu: "$pod_cpu", memory: $pod_memory}
        nodeSelector: {type: kwok}
        tolerations: [{key: kwok.x-k8s.io/node, operator: Exists, effect: NoSchedule}]
---
JOB
  done
} >"$work/jobs.yaml"

# The watch (podwatch.py): one line per pod event, "TIME NAME NODE" (NODE empty
# until bound), stamped as it arrives; it lists and watches again whenever the
# API server ends the watch.
events=$work/events
: >"$events"
python3 "$here/podwatch.py" "$KUBECONFIG" "$ns" volcano.sh/benchmark=true "$events" "$((timeout + 60))" \
  2>"$work/podwatch.log" &
watch_pid=$!
sleep 2
kill -0 "$watch_pid" || { echo "bench.sh: the pod watch did not start" >&2; cat "$work/podwatch.log" >&2; exit 1; }

# counts: "CREATED BOUND" from the events so far.
counts() {
  awk '{ seen[$2] = 1 } NF >= 3 && $3 != "" { bound[$2] = 1 }
       END { print length(seen), length(bound) }' "$events"
}

load_start=$(cut -d' ' -f1-3 /proc/loadavg)
vc_bench_cpu_start
t0=$EPOCHREALTIME
# All at once: four kubectl in parallel, each a share of the jobs (one kubectl
# creates one object after another).
create_failed=0
vc_bench_submit "$work/jobs.yaml" || create_failed=1
[ "$create_failed" = 0 ] || echo "bench.sh: creating vcJobs failed: $(tail -n 3 "$work/create.log")" >&2
t_submitted=$EPOCHREALTIME

result="NOT DONE"
deadline=$(awk -v a="$t0" -v s="$timeout" 'BEGIN { printf "%d", a + s }')
died=""
while :; do
  read -r created bound < <(counts)
  if [ "$bound" -ge "$total" ]; then result=DONE; break; fi
  [ "${EPOCHREALTIME%.*}" -lt "$deadline" ] || break
  for p in "${procs[@]}"; do
    kill -0 "${p##*:}" 2>/dev/null || [[ " $died " == *" ${p%%:*} "* ]] || died="$died ${p%%:*}"
  done
  if [ -n "$died" ]; then break; fi
  sleep 0.5
done
t_end=$EPOCHREALTIME
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

{
  echo "target=$target"
  echo "result=$result"
  echo "total=$total"
  echo "created=$created"
  echo "bound=$bound"
  echo "nodes=$nodes"
  echo "node_cpu=$TEPHRA_NODE_CPU"
  echo "node_memory=$TEPHRA_NODE_MEMORY"
  echo "jobs=$jobs"
  echo "replicas=$replicas"
  echo "min_available=$min_available"
  echo "pod_cpu=$pod_cpu"
  echo "pod_memory=$pod_memory"
  if [ "$target" = tephra ] && [ "${VC_BENCH_TEPHRA_SA:-0}" = 1 ]; then
    echo "identity=service account tephra-system/tephra (API Priority and Fairness: workload-low)"
  else
    echo "identity=admin (system:masters, exempt from API Priority and Fairness)"
  fi
  echo "load_start=$load_start"
  echo "load_end=$load_end"
  echo "submit_s=$(awk -v a="$t0" -v b="$t_submitted" 'BEGIN { printf "%.3f", b - a }')"
  vc_bench_bind_times "$t0" "$total" "$events"
  vc_bench_proc_lines proc
} >"$tout/result"
# The CPU window ends here, within 0.5 s (one poll) of the last bind.
echo "cpu_window_s=$(awk -v a="$t0" -v b="$t_end" 'BEGIN { printf "%.3f", b - a }')" >>"$tout/result"

# Where things stand, for a NOT DONE run and for reading the figures.
k get jobs.batch.volcano.sh -n "$ns" -o wide >"$tout/vcjobs.txt" 2>&1 || true
k get podgroups.scheduling.volcano.sh -n "$ns" -o wide >"$tout/podgroups.txt" 2>&1 || true
cp "$events" "$tout/pod-events.txt"
vc_bench_metrics "$target" "$tout"
if [ "$result" != DONE ]; then
  phases=$(awk 'NR > 1 { n[$2]++ } END { for (p in n) printf "%s %d, ", p, n[p] }' "$tout/podgroups.txt")
  why="after ${timeout} s"
  [ -z "$died" ] || why="at $(awk -v a="$t0" -v b="$t_end" 'BEGIN { printf "%.0f", b - a }') s: exited:$died"
  echo "notes=NOT DONE $why: $bound of $total pods bound, $created created; PodGroups by phase: ${phases%, }" >>"$tout/result"
fi
echo "bench.sh: $target $result: $bound of $total bound" >&2
