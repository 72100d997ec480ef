# shellcheck shell=bash
# Shared by build.sh, run.sh, bench.sh and utilization.sh: where the Volcano binaries are, on top of
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
vc_suites=(admission vcctl jobp jobseq schedulingbase schedulingaction cronjob hypernode stress dra)

# vc_check_suites WHO SUITE...: exits 2, naming WHO, at the first SUITE that is not one of
# vc_suites.
vc_check_suites() {
  local who=$1 s
  shift
  for s in "$@"; do
    case " ${vc_suites[*]} " in *" $s "*) ;; *) echo "$who: unknown suite $s (known: ${vc_suites[*]})" >&2; exit 2 ;; esac
  done
}

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
  crds_established 60 "$vc_src/config/crd/volcano/bases/" \
    || { echo "Volcano's CRDs not established after 60 s" >&2; return 1; }
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
  # CA bundle), each service reference turned into a URL on loopback (some of
  # the chart's lines end in spaces).
  local helm_bin
  helm_bin=$("$repo_dir/tests/install/build-tools.sh" | tail -n 1)
  "$helm_bin" template integration "$vc_src/installer/helm/chart/volcano" --namespace volcano-system \
    --show-only templates/webhooks.yaml --set-string "custom.enabled_admissions=${admissions//,/\\,}" \
    | python3 -c '
import re, sys
port = sys.argv[1]
text = re.sub(r"service:[ \t]*\n\s+name: .*\n\s+namespace: .*\n(\s+)path: (\S+)[ \t]*\n\s+port: 443",
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

# --- shared by bench.sh and utilization.sh: one target on a fresh control plane ---

# vc_bench_tephra_bin TARGET...: when tephra is among TARGETs and TEPHRA_BIN is unset,
# a release build of this checkout (the benchmarks measure the binary as shipped).
vc_bench_tephra_bin() {
  if [ -z "${TEPHRA_BIN:-}" ] && [[ " $* " == *" tephra"* ]]; then
    (cd "$repo_dir" && cargo build -q --release --bin tephra)
    TEPHRA_BIN="${CARGO_TARGET_DIR:-$repo_dir/target}/release/tephra"
  fi
  export TEPHRA_BIN
}

# vc_bench_sched_conf FILE: the scheduler configuration of Volcano's benchmark gang
# case (benchmark/testcases/gang's config/scheduler-config.yaml).
vc_bench_sched_conf() {
  cat >"$1" <<'CONF'
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
CONF
}

# vc_bench_up TARGET VC_SRC SCHED_CONF: a control plane of $nodes kwok nodes with
# TARGET on it reading SCHED_CONF, as the benchmarks run it:
#   volcano: vc_install, the scheduler and controller with client limits $qps/$burst
#            and their metrics on;
#   tephra:  tephra-up.sh (kube-scheduler's client limit from TEPHRA_SCHEDULER_QPS),
#            then tephra and kube-scheduler restarted as one replica each without
#            leader election (as Volcano's three run here), tephra with the admin
#            kubeconfig unless $vc_bench_tephra_sa is 1 (then its service account's).
# Needs: $work, $nodes, $qps, $burst, $TEPHRA_BIN (tephra), TEPHRA_NODE_* exported.
# Sets what tephra-up.sh or vc_install sets (cluster_up, KUBECONFIG, tephra_pid,
# metrics_port, vc_pid_of, ...). Call it outside a condition, so that set -e holds.
vc_bench_up() {
  local target=$1 vc_src=$2 sched_conf=$3 me=${0##*/}
  if [ "$target" = tephra ]; then
    tephra_serve_args=(--config "$sched_conf" --leader-elect=false --gang-engine "${vc_bench_engine:-extender}")
    # shellcheck source=tests/cluster/tephra-up.sh
    . "$cluster_dir/tephra-up.sh"
    # kube-scheduler too runs one replica without leader election (tephra's configuration has
    # it on): under the burst its Lease renewal timed out and it exited.
    sed -i 's/^  leaderElect: true/  leaderElect: false/' "$work/cluster/scheduler-config.yaml"
    grep -q '^  leaderElect: false' "$work/cluster/scheduler-config.yaml" \
      || { echo "$me: could not turn kube-scheduler's leader election off" >&2; exit 1; }
    stop_pid "$(cat "$work/cluster/pids/kube-scheduler.pid")"
    sched_port=$(awk -F= '$1 == "SCHEDULER_PORT" { print $2 }' "$work/cluster/env")
    "$bin_dir/kube-scheduler" --config "$work/cluster/scheduler-config.yaml" \
      --authentication-kubeconfig "$KUBECONFIG" --authorization-kubeconfig "$KUBECONFIG" \
      --bind-address 127.0.0.1 --secure-port "$sched_port" >>"$work/cluster/logs/kube-scheduler.log" 2>&1 &
    echo $! >"$work/cluster/pids/kube-scheduler.pid"
    wait_until 60 curl -skf "https://127.0.0.1:$sched_port/healthz" \
      || { echo "$me: kube-scheduler did not come back" >&2; exit 1; }
    if [ "${vc_bench_tephra_sa:-0}" != 1 ]; then
      # The same identity as Volcano's three here: the admin user, whose requests API
      # Priority and Fairness never queues (tephra-up.sh started tephra with its service
      # account's token, as deployed).
      stop_tephra
      cp "$KUBECONFIG" "$work/tephra.kubeconfig"
      start_tephra
    fi
  else
    TEPHRA_CLUSTER_DIR="$work/cluster" "$cluster_dir/up.sh" "$nodes" >/dev/null
    cluster_up=1
    export KUBECONFIG="$work/cluster/kubeconfig"
    # The benchmark's client limits (its Makefile's VOLCANO_*_KUBE_API_QPS/BURST).
    # Metrics on, as the chart deploys them (read at the end).
    vc_scheduler_args=(--kube-api-qps "$qps" --kube-api-burst "$burst" --enable-metrics)
    vc_controller_args=(--kube-api-qps "$qps" --kube-api-burst "$burst" --enable-metrics)
    vc_install "$vc_src" "$sched_conf"
  fi
}

# vc_bench_procs TARGET: the processes to account, NAME:PID, into the array procs:
# the target's own, then the control plane's.
vc_bench_procs() {
  local n
  procs=()
  if [ "$1" = tephra ] && [ "${vc_bench_engine:-extender}" = native ]; then
    # The default profile places the gangs; the extender profile idles.
    procs+=("tephra:$tephra_pid" "kube-scheduler:$(cat "$work/cluster/pids/kube-scheduler-default.pid")"
      "kube-scheduler(idle):$(cat "$work/cluster/pids/kube-scheduler.pid")")
  elif [ "$1" = tephra ]; then
    procs+=("tephra:$tephra_pid" "kube-scheduler:$(cat "$work/cluster/pids/kube-scheduler.pid")")
  else
    for n in vc-scheduler vc-controller-manager vc-webhook-manager; do procs+=("$n:${vc_pid_of[$n]}"); done
    procs+=("kube-scheduler(idle):$(cat "$work/cluster/pids/kube-scheduler.pid")")
  fi
  for n in kube-apiserver etcd kube-controller-manager kwok; do
    procs+=("$n:$(cat "$work/cluster/pids/$n.pid")")
  done
}
# cpu_ticks PID: utime + stime (fields 14 and 15 of /proc/PID/stat; the name in
# field 2 has no spaces here).
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; }
status_kib() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0; }
# vc_bench_cpu_start: each process's CPU ticks now, into cpu0[NAME].
declare -A cpu0=()
vc_bench_cpu_start() {
  local p
  for p in "${procs[@]}"; do cpu0[${p%%:*}]=$(cpu_ticks "${p##*:}"); done
}
# vc_bench_proc_lines [KEY]: per process "KEY=NAME CPU_S PEAK_RSS_MIB RSS_MIB FILE_MIB"
# (KEY default proc): CPU seconds since vc_bench_cpu_start, VmHWM, VmRSS and RssFile;
# "KEY=NAME exited - - -" for a process that is gone.
# vc_bench_bind_times T0 TOTAL EVENTS: from a pod watch's events (podwatch.py: TIME NAME NODE
# ...), the seconds from T0 until the TOTAL-th pod was first seen (created_s), the first and
# the last pod first seen on a node (first_bound_s, all_bound_s once TOTAL are bound) and the
# pods bound per second (rate).
vc_bench_bind_times() {
  awk -v t0="$1" -v total="$2" '
    !($2 in seen) { seen[$2] = $1 }
    NF >= 3 && $3 != "" && $3 != "-" && !($2 in bound) { bound[$2] = $1 }
    END {
      nc = 0; last_c = 0; for (p in seen) { nc++; if (seen[p] > last_c) last_c = seen[p] }
      nb = 0; first_b = 0; last_b = 0
      for (p in bound) { nb++; if (first_b == 0 || bound[p] < first_b) first_b = bound[p]; if (bound[p] > last_b) last_b = bound[p] }
      if (nc >= total) printf "created_s=%.3f\n", last_c - t0
      if (nb > 0) printf "first_bound_s=%.3f\n", first_b - t0
      if (nb >= total) { printf "all_bound_s=%.3f\n", last_b - t0; printf "rate=%.1f\n", nb / (last_b - t0) }
    }' "$3"
}

vc_bench_proc_lines() {
  local key=${1:-proc} p name pid c1 clk
  clk=$(getconf CLK_TCK)
  for p in "${procs[@]}"; do
    name=${p%%:*} pid=${p##*:}
    if [ ! -e "/proc/$pid/stat" ]; then
      echo "$key=$name exited - - -"
      continue
    fi
    c1=$(cpu_ticks "$pid")
    echo "$key=$name $(awk -v a="${cpu0[$name]}" -v b="$c1" -v h="$clk" 'BEGIN { printf "%.2f", (b - a) / h }') \
$(awk -v v="$(status_kib "$pid" VmHWM)" 'BEGIN { printf "%.1f", v / 1024 }') \
$(awk -v v="$(status_kib "$pid" VmRSS)" 'BEGIN { printf "%.1f", v / 1024 }') \
$(awk -v v="$(status_kib "$pid" RssFile)" 'BEGIN { printf "%.1f", v / 1024 }')"
  done
}

# vc_bench_submit YAML [N]: creates the objects of the multi-document YAML file all at
# once: N kubectl in parallel (default 4), each a share of the documents (one kubectl
# creates one object after another). Output in $work/create.log; fails if one failed.
vc_bench_submit() {
  local n=${2:-4} parts files w i p failed=0 create_pids=()
  csplit -s -z -f "$work/jobs-part-" "$1" '/^---$/+1' '{*}'
  parts=("$work"/jobs-part-*)
  for ((w = 0; w < n; w++)); do
    files=()
    for ((i = w; i < ${#parts[@]}; i += n)); do files+=(-f "${parts[$i]}"); done
    [ "${#files[@]}" -gt 0 ] || continue
    k --request-timeout=0 create "${files[@]}" >>"$work/create.log" 2>&1 &
    create_pids+=($!)
  done
  for p in "${create_pids[@]}"; do wait "$p" || failed=1; done
  return "$failed"
}

# vc_bench_metrics TARGET OUT: the schedulers' and the API server's /metrics into OUT.
vc_bench_metrics() {
  local target=$1 out=$2 token
  token=$(awk '/token:/ { print $2 }' "$KUBECONFIG")
  if [ "$target" = tephra ]; then
    curl -sf "http://127.0.0.1:$metrics_port/metrics" >"$out/tephra.metrics" || true
    curl -sk --max-time 10 -H "Authorization: Bearer $token" \
      "https://127.0.0.1:$(awk -F= '$1 == "SCHEDULER_PORT" { print $2 }' "$work/cluster/env")/metrics" >"$out/kube-scheduler.metrics" || true
  else
    curl -sf "http://$vc_scheduler_metrics/metrics" >"$out/vc-scheduler.metrics" || true
    curl -sf "http://$vc_controller_metrics/metrics" >"$out/vc-controller-manager.metrics" || true
  fi
  # The API server's own series (API Priority and Fairness waits and rejections among them).
  curl -sk --max-time 10 -H "Authorization: Bearer $token" \
    "$(awk '/server:/ { print $2; exit }' "$KUBECONFIG")/metrics" >"$out/kube-apiserver.metrics" || true
}

# vc_bench_cleanup: the EXIT trap of a benchmark's target run: logs into $tout, the
# pod watch ($watch_pid), the target and the control plane stopped, $work removed.
vc_bench_cleanup() {
  local rc=$? pid
  cp "$work"/*.log "$tout/" 2>/dev/null || true
  if [ -d "$work/cluster/logs" ]; then cp -r "$work/cluster/logs" "$tout/cluster-logs" 2>/dev/null || true; fi
  [ -z "$watch_pid" ] || stop_pid "$watch_pid"
  if [ "$target" = tephra ]; then stop_tephra; fi
  for pid in ${vc_pids[@]+"${vc_pids[@]}"}; do stop_pid "$pid"; done
  if [ "$cluster_up" = 1 ]; then "$cluster_dir/down.sh" "$work/cluster" || true; fi
  rm -rf "$work"
  exit "$rc"
}
