#!/usr/bin/env bash
# Utilization under contention on the real control plane, side by side: Volcano
# v1.14.1 against tephra + kube-scheduler, each on a fresh loopback control plane
# of tests/cluster, one after the other in one run of this script. The same
# workload as `cargo bench --bench utilization` runs in the simulator and under
# `tephra serve --embedded` (benches/utilization.rs).
#
# Usage: utilization.sh [TARGET...]     TARGET: volcano tephra (default: both, in that order)
#
# The workload: kwok nodes (6 × 8 cpu, 64Gi, 110 pods), two Queues `ua` (weight
# 1) and `ub` (weight 3), reclaimable as by default, and per queue PER_QUEUE
# vcJobs `ua-000`, `ub-000`, ... of one pod each (minAvailable 1, busybox
# `sleep N` with N = 5 + index mod 4 seconds, 1 cpu, 64Mi, restartPolicy Never,
# nodeSelector type=kwok), far more than the cluster holds at once, all
# submitted at once. kwok-stages.yaml ends each pod N seconds after it started,
# as its `sleep N` would. The scheduler configuration is that of bench.sh (the
# benchmark gang case's: actions enqueue, allocate, backfill; plugins priority,
# gang, conformance | overcommit, drf, predicates, proportion, nodeorder,
# binpack), given to each target as bench.sh gives it, and the targets run as
# bench.sh runs them (vc_bench_up in lib.sh).
# Measured per target, from the submission: a watch on the pods, stamped as
# each event arrives, gives every second how many cpu are held by pods bound to
# a node and not finished (Pending on a node, or Running), per queue. Printed:
# the mean share of the cluster's cpu held over the window (default 10–50 s),
# each queue's mean cpu in the window and its part of what was held (the
# weights ask 25 % / 75 %), whether a queue ran out of waiting work (all its
# pods started) inside the window, which would make the shares meaningless,
# when every pod had finished, and per process the CPU seconds used from the
# submission to the window's end and to the end of the run (utime + stime from
# /proc/PID/stat) and the peak resident memory (VmHWM). The machine's load
# average at the start and the end of each target is printed with it: the
# schedulers share the machine with the control plane and whatever else runs.
# Results, the pod events, the per-second samples, logs and the schedulers'
# /metrics stay in the output folder.
#
# Environment:
#   VC_UTIL_NODES (6), VC_UTIL_NODE_CPU (8), VC_UTIL_NODE_MEMORY (64Gi)
#   VC_UTIL_PER_QUEUE (320)   one-pod vcJobs per queue
#   VC_UTIL_WINDOW_START (10), VC_UTIL_WINDOW_END (50): the window, seconds after submission
#   VC_UTIL_TIMEOUT           seconds per target from submission until every pod has
#                             finished (default 150, at most 600; at least the window's end)
#   VC_UTIL_QPS (5000), VC_UTIL_BURST (10000): the schedulers' and controllers' client limits
#   VC_UTIL_SUBMITTERS (8)    kubectl creating the vcJobs in parallel, each a share
#   VC_UTIL_OUT               folder for results and logs (default: a new temp folder, kept)
#   TEPHRA_BIN                tephra binary (default: cargo build --release of this checkout)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/volcano-e2e/lib.sh
. "$here/lib.sh"

nodes=${VC_UTIL_NODES:-6}
node_cpu=${VC_UTIL_NODE_CPU:-8}
node_memory=${VC_UTIL_NODE_MEMORY:-64Gi}
per_queue=${VC_UTIL_PER_QUEUE:-320}
win_start=${VC_UTIL_WINDOW_START:-10}
win_end=${VC_UTIL_WINDOW_END:-50}
timeout=${VC_UTIL_TIMEOUT:-150}
qps=${VC_UTIL_QPS:-5000}
burst=${VC_UTIL_BURST:-10000}
submitters=${VC_UTIL_SUBMITTERS:-8}
ns=default
queues=(ua ub)
declare -A weight=([ua]=1 [ub]=3)
total=$((${#queues[@]} * per_queue))
for v in "$nodes" "$node_cpu" "$per_queue" "$win_start" "$win_end" "$timeout" "$submitters"; do
  [[ $v =~ ^[0-9]+$ ]] || { echo "utilization.sh: '$v' is not a whole number" >&2; exit 2; }
done
if [ "$win_start" -ge "$win_end" ] || [ "$win_end" -gt "$timeout" ] || [ "$timeout" -gt 600 ]; then
  echo "utilization.sh: need VC_UTIL_WINDOW_START < VC_UTIL_WINDOW_END <= VC_UTIL_TIMEOUT <= 600" >&2
  exit 2
fi

# --- driver: each target in a child process of its own (own control plane, own cleanup) ---
if [ "${1:-}" != --one ]; then
  targets=("$@")
  [ "${#targets[@]}" -gt 0 ] || targets=(volcano tephra)
  for t in "${targets[@]}"; do
    case $t in volcano | tephra) ;; *) echo "utilization.sh: unknown target $t (volcano or tephra)" >&2; exit 2 ;; esac
  done
  "$here/build.sh" >&2
  vc_bench_tephra_bin "${targets[@]}"
  out=${VC_UTIL_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/volcano-util.XXXXXX")}
  mkdir -p "$out"
  for t in "${targets[@]}"; do
    echo "== $t ($(date -u +%T), load average $(cut -d' ' -f1-3 /proc/loadavg))" >&2
    start=$(date +%s)
    "$0" --one "$t" "$out/$t" || echo "utilization.sh: the $t run failed (logs in $out/$t)" >&2
    echo "== $t took $(($(date +%s) - start)) s in all" >&2
  done
  python3 - "$out" "${targets[@]}" <<'PY'
import os, sys
out, targets = sys.argv[1], sys.argv[2:]
def load(t):
    path = os.path.join(out, t, "result")
    if not os.path.exists(path):
        return None
    r = {"proc": [], "proc_window": []}
    for line in open(path):
        key, _, val = line.rstrip("\n").partition("=")
        if key in ("proc", "proc_window"):
            r[key].append(val.split())
        else:
            r[key] = val
    return r
res = {t: load(t) for t in targets}
shown = [t for t in targets if res[t]]
for t in targets:
    if not res[t]:
        print(f"{t}: FAILED (no result; see {os.path.join(out, t)})")
if not shown:
    sys.exit(0)
f = res[shown[0]]
print(f"== utilization under contention: queues ua:ub = 1:3, {f['per_queue']} one-pod vcJobs each "
      f"(1 cpu, sleep 5-8 s) on {f['nodes']} kwok nodes x {f['node_cpu']} cpu; mean over "
      f"{f['win_start']}-{f['win_end']} s after submission, sampled every 1 s")
groups = {"volcano": ("vc-scheduler", "vc-controller-manager", "vc-webhook-manager"),
          "tephra": ("tephra", "kube-scheduler")}
plane = ("kube-apiserver", "etcd", "kube-controller-manager", "kwok")
def cpu_sum(r, key, names):
    vals = [float(p[1]) for p in r[key] if p[0] in names and p[1] != "exited"]
    return f"{sum(vals):.1f}" if vals else "-"
def rss_sum(r, names):
    vals = [float(p[2]) for p in r["proc"] if p[0] in names and p[2] != "-"]
    return f"{sum(vals):.0f}" if vals else "-"
def secs(r, k):
    v = r.get(k, "")
    return f"{float(v):.1f} s" if v not in ("", "-") else "-"
rows = [
    ("result", lambda r: r["result"]),
    (f"cpu bound, mean % of {f['cluster_cpu']}", lambda r: f"{float(r['util_pct']):.1f} %" if r.get("util_pct") else "-"),
    ("ua: mean cpu, part of bound", lambda r: f"{float(r['ua_cpu']):.1f}, {float(r['ua_part']):.1f} %" if r.get("ua_cpu") else "-"),
    ("ub: mean cpu, part of bound", lambda r: f"{float(r['ub_cpu']):.1f}, {float(r['ub_part']):.1f} %" if r.get("ub_cpu") else "-"),
    ("queue out of work in window", lambda r: r.get("dry_in_window", "-")),
    ("samples in window", lambda r: r.get("samples", "-")),
    ("vcJobs submitted in", lambda r: secs(r, "submit_s")),
    ("first pod bound", lambda r: secs(r, "first_bound_s")),
    ("pods started by window end", lambda r: f"{r.get('started_ua', '-')} ua + {r.get('started_ub', '-')} ub"),
    (f"all {f['total']} pods finished", lambda r: secs(r, "finished_s") if r.get("finished_s") else f"not ({r.get('finished', '?')} by {secs(r, 'run_s')})"),
    ("CPU s, target, to window end", lambda r: cpu_sum(r, "proc_window", groups[r["target"]])),
    ("CPU s, target, whole run", lambda r: cpu_sum(r, "proc", groups[r["target"]])),
    ("peak RSS MiB, target", lambda r: rss_sum(r, groups[r["target"]])),
    ("CPU s, control plane, to window end", lambda r: cpu_sum(r, "proc_window", plane)),
    ("load average at start", lambda r: r["load_start"]),
    ("load average at end", lambda r: r["load_end"]),
]
w = 36
print(f"{'':{w}}" + "".join(f"{t:>22}" for t in shown))
for label, fn in rows:
    print(f"{label:{w}}" + "".join(f"{fn(res[t]):>22}" for t in shown))
print("  (target: volcano = " + " + ".join(groups["volcano"]) + "; tephra = " + " + ".join(groups["tephra"])
      + "; control plane = " + " + ".join(plane) + ")")
for t in shown:
    if res[t].get("notes"):
        print(f"{t}: {res[t]['notes']}")
print()
print(f"{'target':8} {'process':24} {'CPU s to window end':>20} {'CPU s whole run':>16} {'peak RSS MiB':>13}")
for t in shown:
    r = res[t]
    win = {p[0]: p[1] for p in r["proc_window"]}
    for name, cpu, hwm, *_ in r["proc"]:
        if cpu == "exited":
            print(f"{t:8} {name:24} {'(exited before the end)':>51}")
            continue
        wv = win.get(name, "-")
        wv = f"{float(wv):.2f}" if wv not in ("-", "exited") else wv
        print(f"{t:8} {name:24} {wv:>20} {float(cpu):16.2f} {float(hwm):13.0f}")
print()
# The course of each run, every 5 s: cpu held by ua / ub.
series = {}
for t in shown:
    series[t] = {}
    path = os.path.join(out, t, "samples.txt")
    if os.path.exists(path):
        for line in open(path):
            s, a, b = line.split()
            series[t][int(s)] = (int(a), int(b))
last = max((max(v) for v in series.values() if v), default=0)
print(f"{'s':>4} " + "".join(f"{t + ' ua/ub':>16}" for t in shown))
for s in range(0, last + 1, 5):
    print(f"{s:4d} " + "".join(f"{('%d/%d' % series[t][s]) if s in series[t] else '-':>16}" for t in shown))
print()
# How the schedulers spent their sessions, from their own series.
def metrics(path):
    m = {}
    if os.path.exists(path):
        for line in open(path):
            if line.startswith("#") or not line.strip():
                continue
            k, _, v = line.rstrip("\n").rpartition(" ")
            try:
                m[k] = float(v)
            except ValueError:
                pass
    return m
def mean_ms(m, name, scale):
    parts = []
    for k, tot in m.items():
        if k.startswith(name + "_sum"):
            n = m.get(k.replace("_sum", "_count", 1), 0)
            if n:
                parts.append(f"{k[len(name) + 4:] or 'all'} {int(n)} x {tot / n * scale:.1f} ms")
    return "; ".join(parts) or "-"
def labelled(m, prefix):
    return ", ".join(f"{k.split('{', 1)[1][:-1]} {int(v)}" for k, v in m.items() if k.startswith(prefix) and v) or "-"
for t in shown:
    d = os.path.join(out, t)
    if t == "volcano":
        m = metrics(os.path.join(d, "vc-scheduler.metrics"))
        print(f"volcano: vc-scheduler sessions: {mean_ms(m, 'volcano_e2e_scheduling_latency_milliseconds', 1)}")
    else:
        m = metrics(os.path.join(d, "tephra.metrics"))
        ks = metrics(os.path.join(d, "kube-scheduler.metrics"))
        print(f"tephra: sessions: {mean_ms(m, 'volcano_e2e_scheduling_latency_milliseconds', 1)}")
        print(f"tephra: extender requests (mean time): {mean_ms(m, 'tephra_extender_request_duration_seconds', 1000)}")
        print(f"tephra: extender answers: {labelled(m, 'tephra_extender_requests_total{')}")
        print(f"tephra: kube-scheduler attempts: {labelled(ks, 'scheduler_schedule_attempts_total{')}")
print(f"results, pod events, samples, logs and /metrics: {out}")
PY
  exit 0
fi

# --- one target -------------------------------------------------------------------
target=$2 tout=$3
mkdir -p "$tout"
vc_src=$(vc_source_dir)
work=$(mktemp -d "${TMPDIR:-/tmp}/volcano-util-work.XXXXXX")
tephra_pid="" cluster_up=0 watch_pid=""
trap vc_bench_cleanup EXIT
k() { kubectl --request-timeout=20s "$@"; }

export TEPHRA_NODE_CPU=$node_cpu TEPHRA_NODE_MEMORY=$node_memory TEPHRA_NODE_PODS=110
export TEPHRA_SCHEDULER_QPS=$qps
# Pods end as their `sleep N` would: that freed room is what the schedulers refill.
export TEPHRA_KWOK_EXTRA_CONFIG=$here/kwok-stages.yaml
mkdir -p "$work/sched-conf"
sched_conf=$work/sched-conf/volcano-scheduler.conf
vc_bench_sched_conf "$sched_conf"
vc_bench_tephra_sa=0
vc_bench_up "$target" "$vc_src" "$sched_conf"
vc_bench_procs "$target"

# The two queues; vcJobs are admitted only into Open queues, which the target's queue
# controller makes them.
for q in "${queues[@]}"; do
  cat <<Q
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: $q}
spec: {weight: ${weight[$q]}}
---
Q
done >"$work/queues.yaml"
k create -f "$work/queues.yaml" >>"$work/install.log" 2>&1 \
  || { echo "utilization.sh: creating the queues failed" >&2; tail -n 5 "$work/install.log" >&2; exit 1; }
queues_open() {
  local q
  for q in "${queues[@]}"; do
    [ "$(k get queue "$q" -o jsonpath='{.status.state}')" = Open ] || return 1
  done
}
wait_until 60 queues_open || { echo "utilization.sh: the queues were not Open after 60 s" >&2; exit 1; }

# The vcJobs, the queues' interleaved (ua-000, ub-000, ua-001, ...) so that neither
# is submitted first.
for ((i = 0; i < per_queue; i++)); do
  for q in "${queues[@]}"; do
    cat <<JOB
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: $q-$(printf %03d "$i")
  namespace: $ns
  labels: {volcano.sh/benchmark: utilization}
spec:
  schedulerName: volcano
  minAvailable: 1
  queue: $q
  tasks:
  - name: w
    replicas: 1
    template:
      metadata:
        labels: {volcano.sh/benchmark: utilization}
      spec:
        schedulerName: volcano
        restartPolicy: Never
        containers:
        - name: main
          image: busybox:1.36
          imagePullPolicy: IfNotPresent
          command: ["/bin/sh", "-c", "sleep $((5 + i % 4))"]
          resources:
            requests: {cpu: "1", memory: 64Mi}
            limits: {cpu: "1", memory: 64Mi}
        nodeSelector: {type: kwok}
        tolerations: [{key: kwok.x-k8s.io/node, operator: Exists, effect: NoSchedule}]
---
JOB
  done
done >"$work/jobs.yaml"

# The watch (podwatch.py): one line per pod event, "TIME NAME NODE PHASE", stamped as it
# arrives; a watch rather than repeated LISTs, which would load the API server measured.
events=$work/events
: >"$events"
python3 "$here/podwatch.py" "$KUBECONFIG" "$ns" volcano.sh/benchmark=utilization "$events" "$((timeout + 60))" phase \
  2>"$work/podwatch.log" &
watch_pid=$!
sleep 2
kill -0 "$watch_pid" || { echo "utilization.sh: the pod watch did not start" >&2; cat "$work/podwatch.log" >&2; exit 1; }

# finished: pods whose last event shows them Succeeded, Failed or gone.
finished() {
  awk '{ phase[$2] = $4 } END { n = 0; for (p in phase) if (phase[p] ~ /^(Succeeded|Failed|Deleted)$/) n++; print n }' "$events"
}

load_start=$(cut -d' ' -f1-3 /proc/loadavg)
vc_bench_cpu_start
t0=$EPOCHREALTIME
create_failed=0
vc_bench_submit "$work/jobs.yaml" "$submitters" || create_failed=1
[ "$create_failed" = 0 ] || echo "utilization.sh: creating vcJobs failed: $(tail -n 3 "$work/create.log")" >&2
t_submitted=$EPOCHREALTIME

# Until every pod has finished (and the window is over), at most $timeout s; the
# processes' CPU is read once more at the window's end.
result="NOT DONE" died="" done_window=0 n_finished=0
win_end_at=$(awk -v a="$t0" -v s="$win_end" 'BEGIN { printf "%.3f", a + s }')
deadline=$(awk -v a="$t0" -v s="$timeout" 'BEGIN { printf "%d", a + s }')
for ((tick = 0; tick < timeout * 2 + 4; tick++)); do
  if [ "$done_window" = 0 ] && awk -v n="$EPOCHREALTIME" -v w="$win_end_at" 'BEGIN { exit !(n >= w) }'; then
    vc_bench_proc_lines proc_window >"$work/procs-window"
    done_window=1
  fi
  n_finished=$(finished)
  if [ "$n_finished" -ge "$total" ] && [ "$done_window" = 1 ]; then result=DONE; break; fi
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
  echo "finished=$n_finished"
  echo "nodes=$nodes"
  echo "node_cpu=$node_cpu"
  echo "cluster_cpu=$((nodes * node_cpu))"
  echo "per_queue=$per_queue"
  echo "win_start=$win_start"
  echo "win_end=$win_end"
  echo "load_start=$load_start"
  echo "load_end=$load_end"
  echo "submit_s=$(awk -v a="$t0" -v b="$t_submitted" 'BEGIN { printf "%.3f", b - a }')"
  echo "run_s=$(awk -v a="$t0" -v b="$t_end" 'BEGIN { printf "%.3f", b - a }')"
  # From the events, every second: the cpu held per queue (one cpu a pod), and when
  # each queue's last pod started (from then on it has no work waiting).
  python3 - "$events" "$t0" "$win_start" "$win_end" "$((nodes * node_cpu))" "$per_queue" "$tout/samples.txt" \
    "${queues[@]}" <<'PY'
import sys
events, t0, ws, we, cluster, per_queue, samples_path = sys.argv[1:8]
queues = sys.argv[8:]
t0, ws, we, cluster, per_queue = float(t0), int(ws), int(we), int(cluster), int(per_queue)
evs = []
for line in open(events):
    parts = line.split()
    if len(parts) == 4:
        evs.append((float(parts[0]), parts[1], parts[2], parts[3]))
evs.sort(key=lambda e: e[0])
queue_of = lambda name: next((q for q in queues if name.startswith(q + "-")), None)
state, started, finished_at, started_by_end = {}, {}, {}, {}
first_bound = None
i = 0
last = int(evs[-1][0] - t0) + 1 if evs else 0
samples = []
for s in range(0, last + 1):
    at = t0 + s
    while i < len(evs) and evs[i][0] <= at:
        stamp, name, node, phase = evs[i]
        state[name] = (node, phase)
        if node != "-" and name not in started:
            started[name] = stamp
            first_bound = stamp if first_bound is None else min(first_bound, stamp)
        if phase in ("Succeeded", "Failed", "Deleted"):
            finished_at.setdefault(name, stamp)
        i += 1
    held = {q: 0 for q in queues}
    for name, (node, phase) in state.items():
        q = queue_of(name)
        if q and node != "-" and phase not in ("Succeeded", "Failed", "Deleted", "Unknown"):
            held[q] += 1
    samples.append((s, held))
    if s == we:
        started_by_end = {q: sum(1 for n in started if queue_of(n) == q) for q in queues}
with open(samples_path, "w") as f:
    for s, held in samples:
        f.write(f"{s} " + " ".join(str(held[q]) for q in queues) + "\n")
window = [h for s, h in samples if ws <= s <= we]
print(f"samples={len(window)}")
if window:
    mean = {q: sum(h[q] for h in window) / len(window) for q in queues}
    tot = sum(mean.values())
    print(f"util_pct={tot / cluster * 100:.2f}")
    for q in queues:
        print(f"{q}_cpu={mean[q]:.2f}")
        print(f"{q}_part={mean[q] / tot * 100 if tot else 0:.2f}")
    for q in queues:
        print(f"started_{q}={started_by_end.get(q, 0)}")
dry = []
for q in queues:
    mine = [started[n] for n in started if queue_of(n) == q]
    if len(mine) >= per_queue:
        at = max(mine) - t0
        print(f"dry_{q}_s={at:.3f}")
        if at < we:
            dry.append(f"{q} at {at:.0f} s")
print("dry_in_window=" + ("; ".join(dry) if dry else "no"))
if first_bound is not None:
    print(f"first_bound_s={first_bound - t0:.3f}")
expected = per_queue * len(queues)
if len(finished_at) >= expected:
    print(f"finished_s={max(finished_at.values()) - t0:.3f}")
PY
  [ ! -f "$work/procs-window" ] || cat "$work/procs-window"
  vc_bench_proc_lines proc
} >"$tout/result"

# Where things stand, for a NOT DONE run and for reading the figures.
k get jobs.batch.volcano.sh -n "$ns" -o wide >"$tout/vcjobs.txt" 2>&1 || true
k get podgroups.scheduling.volcano.sh -n "$ns" -o wide >"$tout/podgroups.txt" 2>&1 || true
k get queues -o yaml >"$tout/queues.yaml" 2>&1 || true
cp "$events" "$tout/pod-events.txt"
vc_bench_metrics "$target" "$tout"
if [ "$result" != DONE ]; then
  why="after ${timeout} s"
  [ -z "$died" ] || why="at $(awk -v a="$t0" -v b="$t_end" 'BEGIN { printf "%.0f", b - a }') s: exited:$died"
  echo "notes=NOT DONE $why: $n_finished of $total pods finished" >>"$tout/result"
fi
echo "utilization.sh: $target $result: $n_finished of $total finished" >&2
