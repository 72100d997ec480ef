#!/usr/bin/env bash
# Volcano's own end-to-end suites against tephra, or against Volcano itself as
# the baseline, on the loopback control plane of tests/cluster (etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler, kwok nodes).
#
# Usage: run.sh [--target tephra|volcano] [SUITE...]
#   SUITE: admission vcctl jobp jobseq schedulingbase schedulingaction (default: all)
#   --target tephra   (default) kube-scheduler with tephra as its extender,
#                     tephra installed as tests/cluster/tephra-up.sh does (the README's way)
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
suites=()
while [ $# -gt 0 ]; do
  case $1 in
    --target) target=${2:-}; shift 2 ;;
    --target=*) target=${1#--target=}; shift ;;
    -h | --help) sed -n '2,35p' "$0"; exit 0 ;;
    -*) echo "run.sh: unknown option $1" >&2; exit 2 ;;
    *) suites+=("$1"); shift ;;
  esac
done
case $target in tephra | volcano) ;; *) echo "run.sh: --target must be tephra or volcano" >&2; exit 2 ;; esac
[ "${#suites[@]}" -gt 0 ] || suites=("${vc_suites[@]}")
for s in "${suites[@]}"; do
  case " ${vc_suites[*]} " in *" $s "*) ;; *) echo "run.sh: unknown suite $s (known: ${vc_suites[*]})" >&2; exit 2 ;; esac
done

"$here/build.sh" >&2
go_bin=$(find_go)
# The chart's CI scheduler configuration, from the pinned module's source.
vc_src=$(cd "$here" && GOTOOLCHAIN=local "$go_bin" list -m -f '{{.Dir}}' volcano.sh/volcano)
ci_conf=$vc_src/installer/helm/chart/volcano/config/volcano-scheduler-ci.conf
[ -f "$ci_conf" ] || { echo "run.sh: $ci_conf missing" >&2; exit 2; }

nodes=${VC_E2E_NODES:-4}
export TEPHRA_NODE_CPU=${VC_E2E_NODE_CPU:-4} TEPHRA_NODE_MEMORY=${VC_E2E_NODE_MEMORY:-16Gi}
export TEPHRA_KWOK_EXTRA_CONFIG=$here/kwok-stages.yaml
# Volcano CI has the cluster's own kube-scheduler for default-scheduler pods
# (specs make ReplicationControllers and Deployments of both kinds).
export TEPHRA_DEFAULT_SCHEDULER=1
out=${VC_E2E_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/volcano-e2e-$target.XXXXXX")}
mkdir -p "$out"
work=$(mktemp -d "${TMPDIR:-/tmp}/volcano-e2e-work.XXXXXX")
tephra_pid="" cluster_up=0 sync_pid="" vc_pids=()

stop_pid() {
  local pid=$1 i
  kill "$pid" 2>/dev/null || return 0
  for ((i = 0; i < 100; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}
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
free_ports() {
  python3 -c '
import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))' "$1"
}
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
  tephra_serve_args=(--config "$sched_conf")
  # shellcheck source=tests/cluster/tephra-up.sh
  . "$cluster_dir/tephra-up.sh"
  # Volcano's CRDs for the kinds tephra does not serve (HyperNode, JobFlow,
  # JobTemplate, CronJob, ...), as on a cluster moving from Volcano: every
  # spec's cleanup lists HyperNodes, and admission specs create JobFlows and
  # HyperNodes. tephra's own CRDs (Job, Command, PodGroup, Queue) stay.
  for crd in "$vc_src"/config/crd/volcano/bases/*.yaml "$vc_src"/config/crd/jobflow/bases/*.yaml; do
    case $(basename "$crd") in
      batch.volcano.sh_jobs.yaml | bus.volcano.sh_commands.yaml | scheduling.volcano.sh_*) ;;
      *) k apply --server-side -f "$crd" >>"$work/install.log" 2>&1 || { cat "$work/install.log" >&2; exit 1; } ;;
    esac
  done
else
  TEPHRA_CLUSTER_DIR="$work/cluster" "$cluster_dir/up.sh" "$nodes" >/dev/null
  cluster_up=1
  export KUBECONFIG="$work/cluster/kubeconfig"
  k apply --server-side -f "$vc_src/config/crd/volcano/bases/" -f "$vc_src/config/crd/jobflow/bases/" >"$work/install.log" 2>&1 \
    || { cat "$work/install.log" >&2; exit 1; }
  k wait --for condition=established --timeout=60s -f "$vc_src/config/crd/volcano/bases/" >/dev/null
  # The webhook's serving certificate for 127.0.0.1, signed by a CA of its own.
  pki=$work/vc-pki
  mkdir -p "$pki"
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=volcano-e2e-ca" \
    -keyout "$pki/ca.key" -out "$pki/ca.crt" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" -keyout "$pki/tls.key" -out "$pki/tls.csr" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >"$pki/tls.ext"
  openssl x509 -req -in "$pki/tls.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
    -days 2 -extfile "$pki/tls.ext" -out "$pki/tls.crt" 2>/dev/null
  read -r wh_port wh_health sch_metrics sch_health cm_metrics cm_health < <(free_ports 6)
  start_vc() {
    local name=$1
    shift
    "$vc_dir/$name" "$@" >"$work/$name.log" 2>&1 &
    vc_pids+=($!)
  }
  # The admissions Volcano's CI enables (ADMISSION_WEBHOOK and the default run).
  admissions="/pods/mutate,/queues/mutate,/podgroups/mutate,/jobs/mutate,/jobs/validate,/jobflows/validate,/pods/validate,/queues/validate,/podgroups/validate,/hypernodes/validate,/cronjobs/validate"
  # The chart's webhook configurations (vc-webhook-manager only writes their
  # CA bundle), each service reference turned into a URL on loopback.
  helm_bin=$("$repo_dir/tests/install/build-tools.sh" | tail -n 1)
  "$helm_bin" template integration "$vc_src/installer/helm/chart/volcano" --namespace volcano-system \
    --show-only templates/webhooks.yaml --set-string "custom.enabled_admissions=${admissions//,/\\,}" \
    | python3 -c '
import re, sys
port = sys.argv[1]
text = re.sub(r"service:\n\s+name: .*\n\s+namespace: .*\n(\s+)path: (\S+)\n\s+port: 443",
              lambda m: "url: https://127.0.0.1:" + port + m.group(2), sys.stdin.read())
sys.stdout.write(text)' "$wh_port" >"$work/vc-webhooks.yaml"
  k apply -f "$work/vc-webhooks.yaml" >>"$work/install.log" 2>&1 || { cat "$work/install.log" >&2; exit 1; }
  start_vc vc-webhook-manager --kubeconfig "$KUBECONFIG" \
    --listen-address 127.0.0.1 --port "$wh_port" --webhook-url "https://127.0.0.1:$wh_port" \
    --tls-cert-file "$pki/tls.crt" --tls-private-key-file "$pki/tls.key" --ca-cert-file "$pki/ca.crt" \
    --enabled-admission "$admissions" \
    --enable-healthz --healthz-address "127.0.0.1:$wh_health" -v 2
  start_vc vc-controller-manager --kubeconfig "$KUBECONFIG" --leader-elect=false \
    --listen-address "127.0.0.1:$cm_metrics" --enable-healthz --healthz-address "127.0.0.1:$cm_health" -v 2
  start_vc vc-scheduler --kubeconfig "$KUBECONFIG" --leader-elect=false \
    --scheduler-conf "$sched_conf" --listen-address "127.0.0.1:$sch_metrics" \
    --enable-healthz --healthz-address "127.0.0.1:$sch_health" -v 3
  # vc-webhook-manager serves its health check with its TLS certificate.
  for hz in "https://127.0.0.1:$wh_health" "http://127.0.0.1:$cm_health" "http://127.0.0.1:$sch_health"; do
    wait_until 60 curl -skf "$hz/healthz" \
      || { echo "run.sh: a Volcano component is not healthy at $hz" >&2; tail -n 20 "$work"/vc-*.log >&2; exit 1; }
  done
  wait_until 60 k get mutatingwebhookconfiguration volcano-admission-service-pods-mutate \
    || { echo "run.sh: vc-webhook-manager registered no webhooks" >&2; tail -n 30 "$work/vc-webhook-manager.log" >&2; exit 1; }
  wait_until 60 k get queue default || { echo "run.sh: no queue default" >&2; exit 1; }
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
