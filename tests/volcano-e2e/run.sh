#!/usr/bin/env bash
# Volcano's own end-to-end suites against tephra, or against Volcano itself as
# the baseline, on the loopback control plane of tests/cluster (etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler, kwok nodes).
#
# Usage: run.sh [--target tephra|volcano] [--engine extender|native] [SUITE...]
#   SUITE: admission vcctl jobp jobseq schedulingbase schedulingaction cronjob hypernode stress
#          dra (default: all)
#   --target tephra   (default) kube-scheduler with tephra as its extender,
#                     tephra installed as tests/cluster/tephra-up.sh does (the README's way)
#   --engine extender (default) tephra's gang engine: kube-scheduler's extender calls;
#   --engine native   kube-scheduler's own gang scheduling in its default profile
#                     (tephra --gang-engine native; only with --target tephra)
#   --target volcano  Volcano's vc-scheduler, vc-controller-manager and
#                     vc-webhook-manager out of cluster, webhooks by URL; kube-scheduler
#                     keeps its default profile only
#
# What Volcano's CI sets up (hack/run-e2e-kind.sh) is mirrored: four untainted
# worker nodes and kind's control-plane node (tainted NoSchedule, no pods of the
# specs; it still counts in the capacity the scheduler's overcommit and
# proportion plugins see, which some preemption specs rely on), namespace volcano-system with the scheduler configuration in
# ConfigMap integration-scheduler-configmap (key volcano-scheduler-ci.conf, the
# chart's CI configuration), and VC_BIN, a folder holding vcctl. Specs that edit
# that ConfigMap expect the scheduler to reload it: a sync loop copies it into
# the target's configuration file (tephra serve --config, vc-scheduler
# --scheduler-conf), which both reload when it changes.
#
# Specs listed in skip.txt (one line per spec, with its reason) are skipped;
# kwok-stages.yaml makes pods end as their container command would (exit codes).
# Specs listed in differences.txt check Volcano v1.14.1 behaviour that tephra
# deliberately does differently: against tephra a failing one is reported as a
# known difference with its reason, not counted as failed.
# Prints per suite `SUITE: N passed, M failed, K skipped`, each failure's spec
# and first assertion, the known differences and skipped specs with their
# reasons, and a total line. Exits non-zero when a spec failed.
#
# Environment:
#   TEPHRA_BIN           tephra binary (default: cargo build of this checkout)
#   VC_E2E_NODES         worker nodes (default 4), VC_E2E_NODE_CPU (default 4),
#                        VC_E2E_NODE_MEMORY (default 16Gi): a CI worker's size
#                        (hypernode alone: 8 nodes of 8 cpu and 8Gi, as Volcano's CI)
#   VC_E2E_FOCUS         ginkgo focus regex applied to every suite (default: all specs)
#   VC_E2E_SKIP          a further ginkgo skip regex for every suite (reported as
#                        skipped without a reason from skip.txt)
#   VC_E2E_SUITE_TIMEOUT ginkgo timeout per suite (default 60m)
#   VC_E2E_OUT           folder for JSON reports and logs (default: a new temp folder, kept)
#   VC_E2E_CONTROL_PLANE_NODE=0  leave kind's tainted control-plane node out
#   VC_E2E_KEEP=1        leave the control plane and target running at the end
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/volcano-e2e/lib.sh
. "$here/lib.sh"

target=tephra
engine=extender
suites=()
while [ $# -gt 0 ]; do
  case $1 in
    --target) target=${2:-}; shift 2 ;;
    --target=*) target=${1#--target=}; shift ;;
    --engine) engine=${2:-}; shift 2 ;;
    --engine=*) engine=${1#--engine=}; shift ;;
    -h | --help) sed -n '2,/^set -euo/{/^#/p}' "$0"; exit 0 ;;
    -*) echo "run.sh: unknown option $1" >&2; exit 2 ;;
    *) suites+=("$1"); shift ;;
  esac
done
case $target in tephra | volcano) ;; *) echo "run.sh: --target must be tephra or volcano" >&2; exit 2 ;; esac
case $engine in extender | native) ;; *) echo "run.sh: --engine must be extender or native" >&2; exit 2 ;; esac
[ "${#suites[@]}" -gt 0 ] || suites=("${vc_suites[@]}")
vc_check_suites run.sh "${suites[@]}"

"$here/build.sh" --for "$target" "${suites[@]}" >&2
# The chart's CI scheduler configuration, from the pinned module's source.
vc_src=$(vc_source_dir)
ci_conf=$vc_src/installer/helm/chart/volcano/config/volcano-scheduler-ci.conf
[ -f "$ci_conf" ] || { echo "run.sh: $ci_conf missing" >&2; exit 2; }

# Volcano's hypernode CI runs on eight kwok nodes of 8 cpu and 8Gi (its specs name
# kwok-node-0..7 in their HyperNodes and size pods to those nodes); the other suites on four
# CI workers.
if [ "${suites[*]}" = hypernode ]; then
  def_nodes=8 def_cpu=8 def_memory=8Gi
else
  def_nodes=4 def_cpu=4 def_memory=16Gi
  case " ${suites[*]} " in
    *" hypernode "*) echo "run.sh: hypernode runs with the other suites' 4 nodes of 4 cpu; run it alone for Volcano's 8 nodes of 8 cpu" >&2 ;;
  esac
fi
nodes=${VC_E2E_NODES:-$def_nodes}
export TEPHRA_NODE_CPU=${VC_E2E_NODE_CPU:-$def_cpu} TEPHRA_NODE_MEMORY=${VC_E2E_NODE_MEMORY:-$def_memory}
export TEPHRA_KWOK_EXTRA_CONFIG=$here/kwok-stages.yaml
# Volcano CI has the cluster's own kube-scheduler for default-scheduler pods
# (specs make ReplicationControllers and Deployments of both kinds).
export TEPHRA_DEFAULT_SCHEDULER=1
out=${VC_E2E_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/volcano-e2e-$target.XXXXXX")}
mkdir -p "$out"
work=$(mktemp -d "${TMPDIR:-/tmp}/volcano-e2e-work.XXXXXX")
tephra_pid="" cluster_up=0 sync_pid=""

cleanup() {
  local rc=$?
  # Logs stay with the reports.
  cp "$work"/*.log "$out/" 2>/dev/null || true
  if [ -d "$work/cluster/logs" ]; then cp -r "$work/cluster/logs" "$out/cluster-logs" 2>/dev/null || true; fi
  if [ "${VC_E2E_KEEP:-0}" = 1 ]; then
    echo "run.sh: left running: KUBECONFIG=$work/cluster/kubeconfig (down.sh $work/cluster)" >&2
    exit "$rc"
  fi
  [ -z "$sync_pid" ] || stop_pid "$sync_pid"
  if [ "$target" = tephra ]; then stop_tephra; fi
  local pid
  for pid in ${vc_pids[@]+"${vc_pids[@]}"}; do stop_pid "$pid"; done
  if [ "$cluster_up" = 1 ]; then "$cluster_dir/down.sh" "$work/cluster" || true; fi
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
k() { kubectl --request-timeout=20s "$@"; }

# The scheduler configuration file the target reads; the sync loop keeps it
# equal to the ConfigMap.
# A folder of its own: vc-scheduler watches the file's folder, and $work has logs.
mkdir -p "$work/sched-conf"
sched_conf=$work/sched-conf/volcano-scheduler-ci.conf
cp "$ci_conf" "$sched_conf"

if [ "$target" = tephra ]; then
  if [ -z "${TEPHRA_BIN:-}" ]; then
    (cd "$repo_dir" && cargo build -q --bin tephra)
    TEPHRA_BIN="${CARGO_TARGET_DIR:-$repo_dir/target}/debug/tephra"
  fi
  tephra_serve_args=(--config "$sched_conf" --gang-engine "$engine")
  # The native engine sends gang pods to the cluster's default profile.
  if [ "$engine" = native ]; then export TEPHRA_DEFAULT_SCHEDULER=1; fi
  # shellcheck source=tests/cluster/tephra-up.sh
  . "$cluster_dir/tephra-up.sh"
  # Volcano's CRDs for the kinds tephra does not serve (HyperNode, JobFlow,
  # JobTemplate, CronJob, ...), as on a cluster moving from Volcano: every
  # spec's cleanup lists HyperNodes, and admission specs create JobFlows and
  # HyperNodes. tephra's own CRDs (Job, Command, PodGroup, Queue) stay.
  vc_extra_crds_for_tephra "$vc_src"
else
  TEPHRA_CLUSTER_DIR="$work/cluster" "$cluster_dir/up.sh" "$nodes" >/dev/null
  cluster_up=1
  export KUBECONFIG="$work/cluster/kubeconfig"
  vc_install "$vc_src" "$sched_conf"
fi

# --- what Volcano's CI has besides the scheduler -----------------------------
# kind's control-plane node, as big as a worker (kind's nodes are all the same
# host), tainted as kubeadm taints it. Volcano's scheduler counts every node's
# allocatable in the cluster total (overcommit's 1.2 x total, proportion's
# deserved), while e2eutil.ClusterSize sizes jobs by the untainted nodes only:
# "preemption only works in the same queue" admits its high-priority job only
# because this node's room is in the total.
if [ "${VC_E2E_CONTROL_PLANE_NODE:-1}" = 1 ]; then
  k apply -f - >/dev/null <<NODE
apiVersion: v1
kind: Node
metadata:
  name: kwok-control-plane
  annotations: {kwok.x-k8s.io/node: fake, node.alpha.kubernetes.io/ttl: "0"}
  labels: {type: kwok, kubernetes.io/hostname: kwok-control-plane, kubernetes.io/os: linux,
           kubernetes.io/arch: amd64, node-role.kubernetes.io/control-plane: ""}
spec:
  taints: [{key: node-role.kubernetes.io/control-plane, effect: NoSchedule}]
status:
  capacity: {cpu: "$TEPHRA_NODE_CPU", memory: $TEPHRA_NODE_MEMORY, pods: "110"}
  allocatable: {cpu: "$TEPHRA_NODE_CPU", memory: $TEPHRA_NODE_MEMORY, pods: "110"}
NODE
  wait_until 60 sh -c "kubectl --request-timeout=5s get node kwok-control-plane \
    -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}' | grep -q True" \
    || { echo "run.sh: the control-plane node did not become Ready" >&2; exit 1; }
fi
k create namespace volcano-system >/dev/null 2>&1 || true
k -n volcano-system create configmap integration-scheduler-configmap \
  --from-file=volcano-scheduler-ci.conf="$ci_conf" >/dev/null
# The sync loop: one kubectl read a second, for at most the suites' time.
sync_conf() {
  local i cur
  for ((i = 0; i < 6 * 3600; i++)); do
    if cur=$(kubectl --request-timeout=5s -n volcano-system get configmap integration-scheduler-configmap \
      -o go-template='{{index .data "volcano-scheduler-ci.conf"}}' 2>/dev/null) \
      && [ -n "$cur" ] && [ "$cur" != "$(cat "$sched_conf")" ]; then
      printf '%s\n' "$cur" >"$sched_conf.new" && mv "$sched_conf.new" "$sched_conf"
      echo "$(date -u +%T) scheduler configuration changed" >>"$work/sync.log"
    fi
    sleep 1
  done
}
sync_conf &
sync_pid=$!

# Specs delete their queues with foreground propagation, which kube-controller-
# manager's garbage collector completes only once it watches the Queue kind: it
# finds new CRDs by rediscovery every 30 s. Until then a deleted queue lingers,
# Closed, and the next spec reusing its name (CreateQueue skips a queue that
# exists) has its jobs refused by the Closed queue: "Queue Job Status
# Transition" failed that way when it ran first. So the suites start only after
# a probe queue's foreground deletion has completed.
gc_probe=vc-e2e-gc-probe
probe_start=$(date +%s)
k create -f - >/dev/null <<EOF
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: $gc_probe}
spec: {weight: 1}
EOF
# Only a Closed queue may be deleted; the specs' own teardown closes theirs the same way (once
# the queue controller has opened it, so its first sync does not reopen it).
k wait --for=jsonpath='{.status.state}'=Open "queue/$gc_probe" --timeout=60s >/dev/null
k patch queue "$gc_probe" --subresource=status --type=merge -p '{"status":{"state":"Closed"}}' >/dev/null
k wait --for=jsonpath='{.status.state}'=Closed "queue/$gc_probe" --timeout=60s >/dev/null
kubectl --request-timeout=100s delete queue "$gc_probe" --cascade=foreground --wait --timeout=90s >/dev/null \
  || { echo "run.sh: a foreground-deleted queue was still there after 90 s (the garbage collector does not watch Queues)" >&2; exit 1; }
echo "garbage collector watches Queues (probe deleted in $(($(date +%s) - probe_start)) s)" >&2

# --- the suites ----------------------------------------------------------------
export VC_BIN=$vc_dir
# ginkgo -skip regexes from skip.txt for one suite: the spec text's words in
# order, anything between them (Ginkgo puts labels such as [Slow] in names).
skip_args() {
  python3 - "$here/skip.txt" "$1" <<'PY'
import re, sys
for line in open(sys.argv[1], encoding="utf-8"):
    line = line.rstrip("\n")
    if not line.strip() or line.lstrip().startswith("#"):
        continue
    suite, spec, _reason = (p.strip() for p in line.split("|", 2))
    if suite == sys.argv[2]:
        print("-ginkgo.skip=" + ".*".join(re.escape(w) for w in spec.split()))
PY
}
total_p=0 total_f=0 total_s=0 total_d=0
for suite in "${suites[@]}"; do
  mapfile -t skips < <(skip_args "$suite")
  focus=()
  [ -z "${VC_E2E_FOCUS:-}" ] || focus=("-ginkgo.focus=$VC_E2E_FOCUS")
  [ -z "${VC_E2E_SKIP:-}" ] || focus+=("-ginkgo.skip=$VC_E2E_SKIP")
  mkdir -p "$work/run-$suite"
  echo "== $suite against $target ($(date -u +%T))" >&2
  start=$(date +%s)
  # Each suite from its own folder (a spec may write files next to it).
  (cd "$work/run-$suite" && "$vc_dir/$suite.test" -ginkgo.v -ginkgo.no-color \
    -ginkgo.timeout="${VC_E2E_SUITE_TIMEOUT:-60m}" -ginkgo.poll-progress-after=120s \
    -ginkgo.json-report="$out/$suite.json" ${skips[@]+"${skips[@]}"} ${focus[@]+"${focus[@]}"}) \
    >"$out/$suite.log" 2>&1 || true
  echo "$suite took $(($(date +%s) - start)) s" >&2
  python3 "$here/report.py" "$out/$suite.json" "$suite" "$here/skip.txt" "$out/$suite.counts" "$out/$suite.log" \
    "$here/differences.txt" "$target"
  read -r p f s d <"$out/$suite.counts"
  total_p=$((total_p + p)) total_f=$((total_f + f)) total_s=$((total_s + s)) total_d=$((total_d + d))
done
echo "reports and logs: $out" >&2
echo "volcano-e2e against $target, suites ${suites[*]}; known differences (differences.txt, not counted as failed): $total_d"
echo "total: $total_p passed, $total_f failed, $total_s skipped"
[ "$total_f" -eq 0 ]
