# shellcheck shell=bash
# Shared by build.sh, run.sh and bench.sh: where the Volcano binaries are, on top of
# tests/cluster/lib.sh (Go toolchain, control plane binaries). Sourced only.
# shellcheck disable=SC2034,SC2154 # variables for the scripts that source this, and from them ($work, vc_*_args)

vc_e2e_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/cluster/lib.sh
. "$vc_e2e_dir/../cluster/lib.sh"

# The Volcano release, as pinned in go.mod (the single source of truth).
vc_version=$(awk '$1 == "require" && $2 == "volcano.sh/volcano" { print $3; exit }' "$vc_e2e_dir/go.mod")
vc_dir="$k8s_cache/volcano-$vc_version"
# The suites run here, in this order by default: each needs only the API,
# phases and scheduling, bar the specs in skip.txt.
vc_suites=(admission vcctl jobp jobseq schedulingbase schedulingaction)

# --- shared by run.sh and bench.sh (they source this after setting -euo pipefail) ---

# vc_source_dir: the pinned volcano.sh/volcano module's source folder (build.sh
# has downloaded it).
vc_source_dir() {
  (cd "$vc_e2e_dir" && GOTOOLCHAIN=local "$(find_go)" list -m -f '{{.Dir}}' volcano.sh/volcano)
}

# stop_pid PID: SIGTERM, up to 10 s to exit, then SIGKILL.
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

# free_ports N: N distinct free TCP ports on 127.0.0.1, space separated.
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

# vc_install VC_SRC SCHED_CONF: Volcano's vc-webhook-manager, vc-controller-manager
# and vc-scheduler out of cluster on the running control plane of $KUBECONFIG:
# Volcano's CRDs, the chart's webhook configurations with each service
# reference turned into a URL on loopback, a serving certificate for
# 127.0.0.1, and vc-scheduler reading SCHED_CONF (it reloads the file when it
# changes). Returns once the three are healthy, the webhooks registered and the
# queue `default` made. Extra flags: the arrays vc_webhook_args,
# vc_controller_args, vc_scheduler_args (unset = none).
# Needs: $work (logs go there as vc-*.log, install.log), the function k.
# Sets: vc_pids (all three pids), vc_pid_of[NAME] (pid by binary name),
# vc_scheduler_metrics and vc_controller_metrics (HOST:PORT of /metrics).
# Call it outside a condition (not after `||`), so that set -e stops at a failure.
declare -A vc_pid_of=()
vc_pids=()
vc_install() {
  local vc_src=$1 sched_conf=$2 pki=$work/vc-pki
  k apply --server-side -f "$vc_src/config/crd/volcano/bases/" -f "$vc_src/config/crd/jobflow/bases/" \
    >>"$work/install.log" 2>&1 || { cat "$work/install.log" >&2; return 1; }
  k wait --for condition=established --timeout=60s -f "$vc_src/config/crd/volcano/bases/" >/dev/null
  # The webhook's serving certificate for 127.0.0.1, signed by a CA of its own.
  mkdir -p "$pki"
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=volcano-e2e-ca" \
    -keyout "$pki/ca.key" -out "$pki/ca.crt" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" -keyout "$pki/tls.key" -out "$pki/tls.csr" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >"$pki/tls.ext"
  openssl x509 -req -in "$pki/tls.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
    -days 2 -extfile "$pki/tls.ext" -out "$pki/tls.crt" 2>/dev/null
  local wh_port wh_health sch_metrics sch_health cm_metrics cm_health
  read -r wh_port wh_health sch_metrics sch_health cm_metrics cm_health < <(free_ports 6)
  vc_scheduler_metrics=127.0.0.1:$sch_metrics
  vc_controller_metrics=127.0.0.1:$cm_metrics
  # The admissions Volcano's CI enables (ADMISSION_WEBHOOK and the default run).
  local admissions="/pods/mutate,/queues/mutate,/podgroups/mutate,/jobs/mutate,/jobs/validate,/jobflows/validate,/pods/validate,/queues/validate,/podgroups/validate,/hypernodes/validate,/cronjobs/validate"
  # The chart's webhook configurations (vc-webhook-manager only writes their
  # CA bundle), each service reference turned into a URL on loopback.
  local helm_bin
  helm_bin=$("$repo_dir/tests/install/build-tools.sh" | tail -n 1)
  "$helm_bin" template integration "$vc_src/installer/helm/chart/volcano" --namespace volcano-system \
    --show-only templates/webhooks.yaml --set-string "custom.enabled_admissions=${admissions//,/\\,}" \
    | python3 -c '
import re, sys
port = sys.argv[1]
text = re.sub(r"service:\n\s+name: .*\n\s+namespace: .*\n(\s+)path: (\S+)\n\s+port: 443",
              lambda m: "url: https://127.0.0.1:" + port + m.group(2), sys.stdin.read())
sys.stdout.write(text)' "$wh_port" >"$work/vc-webhooks.yaml"
  k apply -f "$work/vc-webhooks.yaml" >>"$work/install.log" 2>&1 || { cat "$work/install.log" >&2; return 1; }
  vc_start vc-webhook-manager --kubeconfig "$KUBECONFIG" \
    --listen-address 127.0.0.1 --port "$wh_port" --webhook-url "https://127.0.0.1:$wh_port" \
    --tls-cert-file "$pki/tls.crt" --tls-private-key-file "$pki/tls.key" --ca-cert-file "$pki/ca.crt" \
    --enabled-admission "$admissions" \
    --enable-healthz --healthz-address "127.0.0.1:$wh_health" -v 2 ${vc_webhook_args[@]+"${vc_webhook_args[@]}"}
  vc_start vc-controller-manager --kubeconfig "$KUBECONFIG" --leader-elect=false \
    --listen-address "127.0.0.1:$cm_metrics" --enable-healthz --healthz-address "127.0.0.1:$cm_health" -v 2 \
    ${vc_controller_args[@]+"${vc_controller_args[@]}"}
  vc_start vc-scheduler --kubeconfig "$KUBECONFIG" --leader-elect=false \
    --scheduler-conf "$sched_conf" --listen-address "127.0.0.1:$sch_metrics" \
    --enable-healthz --healthz-address "127.0.0.1:$sch_health" -v 3 ${vc_scheduler_args[@]+"${vc_scheduler_args[@]}"}
  # vc-webhook-manager serves its health check with its TLS certificate.
  local hz
  for hz in "https://127.0.0.1:$wh_health" "http://127.0.0.1:$cm_health" "http://127.0.0.1:$sch_health"; do
    wait_until 60 curl -skf "$hz/healthz" \
      || { echo "vc_install: a Volcano component is not healthy at $hz" >&2; tail -n 20 "$work"/vc-*.log >&2; return 1; }
  done
  wait_until 60 k get mutatingwebhookconfiguration volcano-admission-service-pods-mutate \
    || { echo "vc_install: vc-webhook-manager registered no webhooks" >&2; tail -n 30 "$work/vc-webhook-manager.log" >&2; return 1; }
  wait_until 60 k get queue default || { echo "vc_install: no queue default" >&2; return 1; }
}
# vc_start NAME ARGS...: one Volcano binary in the background, log $work/NAME.log.
vc_start() {
  local name=$1
  shift
  "$vc_dir/$name" "$@" >"$work/$name.log" 2>&1 &
  vc_pids+=($!)
  vc_pid_of[$name]=$!
}

# vc_extra_crds_for_tephra VC_SRC: Volcano's CRDs for the kinds tephra does not
# serve (HyperNode, JobFlow, JobTemplate, CronJob, ...), as on a cluster moving
# from Volcano. tephra's own CRDs (Job, Command, PodGroup, Queue) stay.
vc_extra_crds_for_tephra() {
  local crd
  for crd in "$1"/config/crd/volcano/bases/*.yaml "$1"/config/crd/jobflow/bases/*.yaml; do
    case $(basename "$crd") in
      batch.volcano.sh_jobs.yaml | bus.volcano.sh_commands.yaml | scheduling.volcano.sh_*) ;;
      *) k apply --server-side -f "$crd" >>"$work/install.log" 2>&1 || { cat "$work/install.log" >&2; return 1; } ;;
    esac
  done
}
