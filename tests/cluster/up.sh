#!/usr/bin/env bash
# Starts a Kubernetes control plane on loopback: etcd, kube-apiserver,
# kube-controller-manager (all default controllers), kube-scheduler and kwok
# with N fake nodes. Ports are picked free on 127.0.0.1; certificates, keys
# and the admin token are made fresh in a state folder, which down.sh removes.
#
# Usage: up.sh [NODES]        (default 4 nodes of 8 cpu, 32Gi, 110 pods)
# Environment:
#   TEPHRA_CLUSTER_DIR     state folder to create (default: a new mktemp -d)
#   TEPHRA_EXTENDER_URL    e.g. https://127.0.0.1:8443/scheduler: run
#                          kube-scheduler with manifests/scheduler-config.yaml
#                          (profile `volcano`, tephra as extender) at that URL;
#                          without it kube-scheduler runs its default profile only
#   TEPHRA_EXTENDER_CA     CA file that signed the extender's certificate
#   TEPHRA_DEFAULT_SCHEDULER=1  with TEPHRA_EXTENDER_URL: also run a second
#                          kube-scheduler with the default profile only (the
#                          cluster's own scheduler, beside tephra's as the README
#                          deploys it) for pods of schedulerName default-scheduler
#   TEPHRA_NODE_CPU, TEPHRA_NODE_MEMORY, TEPHRA_NODE_PODS  fake node size
#   TEPHRA_SCHEDULER_QPS   kube-scheduler's client qps and burst (benchmarks)
#   TEPHRA_KWOK_EXTRA_CONFIG  a further kwok configuration file (more Stages),
#                          read after kwok-stages.yaml
#   TEPHRA_K8S_FEATURE_GATES  --feature-gates of kube-apiserver, kube-controller-manager
#                          and kube-scheduler (default GenericWorkload=true and
#                          TopologyAwareWorkloadScheduling=true: Kubernetes' own gang
#                          scheduling, with scheduling.k8s.io/v1beta1 served, and its
#                          topology constraints)
# Prints the state folder on its last line; $DIR/env holds KUBECONFIG and the
# ports (sourceable), $DIR/logs the components' logs.
set -euo pipefail
# shellcheck source=tests/cluster/lib.sh
. "$(dirname "$0")/lib.sh"

nodes=${1:-4}
for b in etcd kube-apiserver kube-controller-manager kube-scheduler kwok; do
  if [ ! -x "$bin_dir/$b" ]; then
    echo "up.sh: $bin_dir/$b missing: run tests/cluster/build.sh first" >&2
    exit 2
  fi
done
for tool in openssl kubectl python3; do
  command -v "$tool" >/dev/null || { echo "up.sh: $tool not found" >&2; exit 2; }
done

dir=${TEPHRA_CLUSTER_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/tephra-cluster.XXXXXX")}
mkdir -p "$dir"/{pki,logs,pids,etcd}
# down.sh removes only folders carrying this mark.
touch "$dir/.tephra-cluster"
pki=$dir/pki

# Free ports on 127.0.0.1, all picked while every socket is held so none
# repeats. Another process can still take one before we bind it: rare, and
# then the component fails to start and up.sh says so.
read -r etcd_port etcd_peer_port api_port kcm_port sched_port default_sched_port < <(python3 - <<'PY'
import socket
socks = []
for _ in range(6):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
)

# --- certificates and keys -------------------------------------------------
# One CA signs the API server's serving certificate (and the CSR signer uses
# it); the service-account key pair signs tokens. Valid two days: a test run.
openssl_quiet() { openssl "$@" 2>/dev/null; }
openssl_quiet req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=tephra-test-ca" \
  -keyout "$pki/ca.key" -out "$pki/ca.crt"
openssl_quiet req -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver" \
  -keyout "$pki/apiserver.key" -out "$pki/apiserver.csr"
printf '%s\n' \
  "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc" \
  "extendedKeyUsage=serverAuth" "keyUsage=digitalSignature,keyEncipherment" >"$pki/apiserver.ext"
openssl_quiet x509 -req -in "$pki/apiserver.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" \
  -CAcreateserial -days 2 -extfile "$pki/apiserver.ext" -out "$pki/apiserver.crt"
openssl_quiet genrsa -out "$pki/sa.key" 2048
openssl_quiet rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub"

# The admin user: a static token in system:masters (the API server's token
# file), used by the kubeconfig that every component and test shares.
token=$(openssl rand -hex 24)
printf '%s,admin,admin,system:masters\n' "$token" >"$pki/tokens.csv"
chmod 600 "$pki/tokens.csv" "$pki"/*.key

kubeconfig=$dir/kubeconfig
cat >"$kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: tephra-test
  cluster:
    server: https://127.0.0.1:$api_port
    certificate-authority: $pki/ca.crt
users:
- name: admin
  user:
    token: $token
contexts:
- name: tephra-test
  context: {cluster: tephra-test, user: admin}
current-context: tephra-test
KC
chmod 600 "$kubeconfig"

cat >"$dir/env" <<ENV
KUBECONFIG=$kubeconfig
TEPHRA_CLUSTER_DIR=$dir
API_PORT=$api_port
ETCD_PORT=$etcd_port
KCM_PORT=$kcm_port
SCHEDULER_PORT=$sched_port
ENV

# start NAME ARGS...: runs a component in the background, its pid in pids/.
start() {
  local name=$1
  shift
  "$@" >"$dir/logs/$name.log" 2>&1 &
  echo $! >"$dir/pids/$name.pid"
}
fail() {
  echo "up.sh: $*" >&2
  for log in "$dir"/logs/*.log; do
    echo "--- last lines of $log" >&2
    tail -n 15 "$log" >&2
  done
  "$cluster_dir/down.sh" "$dir" >&2 || true
  exit 1
}
# wait_for WHAT SECONDS CMD...: polls CMD every 0.5 s, at most SECONDS.
wait_for() {
  local what=$1 secs=$2 i pidfile
  shift 2
  for ((i = 0; i < secs * 2; i++)); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    # A component that exited will not come back: say which, at once.
    for pidfile in "$dir"/pids/*.pid; do
      kill -0 "$(cat "$pidfile")" 2>/dev/null || fail "$(basename "$pidfile" .pid) exited"
    done
    sleep 0.5
  done
  fail "$what not ready after ${secs}s"
}

# --- etcd --------------------------------------------------------------------
# Plain HTTP on loopback; no fsync, because the data is thrown away.
start etcd "$bin_dir/etcd" --name default --data-dir "$dir/etcd" \
  --listen-client-urls "http://127.0.0.1:$etcd_port" \
  --advertise-client-urls "http://127.0.0.1:$etcd_port" \
  --listen-peer-urls "http://127.0.0.1:$etcd_peer_port" \
  --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer_port" \
  --initial-cluster "default=http://127.0.0.1:$etcd_peer_port" \
  --unsafe-no-fsync --log-level warn
wait_for etcd 30 curl -sf "http://127.0.0.1:$etcd_port/health"

# --- kube-apiserver ------------------------------------------------------------
# --advertise-address: the machine may have no default route, from which the
# API server would otherwise pick the address it publishes in `kubernetes`.
# Since 1.37 the endpoint reconciler refuses a loopback address, and nothing
# here reaches the API through the `kubernetes` Service: no reconciler.
# --requestheader-*: published in extension-apiserver-authentication, which
# kube-controller-manager and kube-scheduler read (they log errors without it).
# Kubernetes' own gang scheduling (Workload and PodGroup, scheduling.k8s.io/v1beta1) is beta
# and off by default in 1.37, its topology constraints alpha: on here, for tephra's native
# engine. The extender profile runs on the same build.
feature_gates=${TEPHRA_K8S_FEATURE_GATES:-GenericWorkload=true,TopologyAwareWorkloadScheduling=true}
start kube-apiserver "$bin_dir/kube-apiserver" \
  --feature-gates "$feature_gates" --runtime-config scheduling.k8s.io/v1beta1=true \
  --etcd-servers "http://127.0.0.1:$etcd_port" \
  --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --endpoint-reconciler-type none \
  --secure-port "$api_port" \
  --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
  --client-ca-file "$pki/ca.crt" --token-auth-file "$pki/tokens.csv" \
  --requestheader-client-ca-file "$pki/ca.crt" --requestheader-allowed-names front-proxy-client \
  --requestheader-username-headers X-Remote-User --requestheader-group-headers X-Remote-Group \
  --requestheader-extra-headers-prefix X-Remote-Extra- \
  --authorization-mode Node,RBAC \
  --service-account-issuer https://kubernetes.default.svc \
  --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
  --service-cluster-ip-range 10.96.0.0/16 \
  --profiling=false
kubectl_() { kubectl --kubeconfig "$kubeconfig" --request-timeout=10s "$@"; }
wait_for kube-apiserver 90 kubectl_ get --raw /readyz

# --- kube-controller-manager ---------------------------------------------------
# Every default controller; each with its own service account, as kubeadm
# sets it up, so RBAC is exercised.
start kube-controller-manager "$bin_dir/kube-controller-manager" \
  --feature-gates "$feature_gates" --kubeconfig "$kubeconfig" \
  --authentication-kubeconfig "$kubeconfig" --authorization-kubeconfig "$kubeconfig" \
  --bind-address 127.0.0.1 --secure-port "$kcm_port" \
  --leader-elect=false --use-service-account-credentials \
  --service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt" \
  --cluster-signing-cert-file "$pki/ca.crt" --cluster-signing-key-file "$pki/ca.key" \
  --profiling=false
wait_for kube-controller-manager 60 curl -skf "https://127.0.0.1:$kcm_port/healthz"

# --- kube-scheduler ------------------------------------------------------------
sched_config=$dir/scheduler-config.yaml
if [ -n "${TEPHRA_EXTENDER_URL:-}" ]; then
  : "${TEPHRA_EXTENDER_CA:?TEPHRA_EXTENDER_CA must name the CA file of the extender}"
  # tephra's own configuration, with the two things that differ outside a pod:
  # where tephra listens and where its CA file is; plus the kubeconfig, which
  # in a pod would be the in-cluster service account.
  sed -e "s|urlPrefix: .*|urlPrefix: $TEPHRA_EXTENDER_URL|" \
    -e "s|caFile: .*|caFile: $TEPHRA_EXTENDER_CA|" \
    "$repo_dir/manifests/scheduler-config.yaml" >"$sched_config"
else
  cat >"$sched_config" <<SC
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {leaderElect: false}
SC
fi
printf 'clientConnection:\n  kubeconfig: %s\n' "$kubeconfig" >>"$sched_config"
# A benchmark raises the client's rate limit (default 50 requests/s).
if [ -n "${TEPHRA_SCHEDULER_QPS:-}" ]; then
  printf '  qps: %s\n  burst: %s\n' "$TEPHRA_SCHEDULER_QPS" "$TEPHRA_SCHEDULER_QPS" >>"$sched_config"
fi
start kube-scheduler "$bin_dir/kube-scheduler" --feature-gates "$feature_gates" --config "$sched_config" \
  --authentication-kubeconfig "$kubeconfig" --authorization-kubeconfig "$kubeconfig" \
  --bind-address 127.0.0.1 --secure-port "$sched_port"
wait_for kube-scheduler 60 curl -skf "https://127.0.0.1:$sched_port/healthz"
if [ -n "${TEPHRA_EXTENDER_URL:-}" ] && [ "${TEPHRA_DEFAULT_SCHEDULER:-0}" = 1 ]; then
  cat >"$dir/default-scheduler-config.yaml" <<SC
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {leaderElect: false}
clientConnection:
  kubeconfig: $kubeconfig
SC
  if [ -n "${TEPHRA_SCHEDULER_QPS:-}" ]; then
    printf '  qps: %s\n  burst: %s\n' "$TEPHRA_SCHEDULER_QPS" "$TEPHRA_SCHEDULER_QPS" >>"$dir/default-scheduler-config.yaml"
  fi
  start kube-scheduler-default "$bin_dir/kube-scheduler" --feature-gates "$feature_gates" --config "$dir/default-scheduler-config.yaml" \
    --authentication-kubeconfig "$kubeconfig" --authorization-kubeconfig "$kubeconfig" \
    --bind-address 127.0.0.1 --secure-port "$default_sched_port"
  wait_for kube-scheduler-default 60 curl -skf "https://127.0.0.1:$default_sched_port/healthz"
fi

# --- kwok and its nodes ----------------------------------------------------------
# kwok manages only nodes carrying its annotation; it serves nothing itself.
kwok_configs=(--config "$cluster_dir/kwok-stages.yaml")
if [ -n "${TEPHRA_KWOK_EXTRA_CONFIG:-}" ]; then
  kwok_configs+=(--config "$TEPHRA_KWOK_EXTRA_CONFIG")
fi
start kwok "$bin_dir/kwok" --kubeconfig "$kubeconfig" "${kwok_configs[@]}" \
  --manage-nodes-with-annotation-selector kwok.x-k8s.io/node=fake \
  --node-ip 10.0.0.1 --cidr 10.0.0.1/16
# Eight kubectl create at once, each a share of the nodes: one kubectl makes one object after
# another, and a benchmark's thousands of nodes would take minutes.
shards=$((nodes < 8 ? 1 : 8))
for ((w = 0; w < shards; w++)); do
  for ((i = w; i < nodes; i += shards)); do kwok_node "kwok-node-$i"; done >"$dir/nodes-$w.yaml"
done
create_pids=()
for ((w = 0; w < shards; w++)); do
  [ -s "$dir/nodes-$w.yaml" ] || continue
  kubectl_ --request-timeout=120s create -f "$dir/nodes-$w.yaml" >/dev/null 2>>"$dir/logs/nodes.log" &
  create_pids+=($!)
done
for p in ${create_pids[@]+"${create_pids[@]}"}; do wait "$p" || fail "creating $nodes nodes: $(tail -n 3 "$dir/logs/nodes.log")"; done
# The server's table (a line a node), not the nodes themselves: thousands of whole nodes
# every half second would load the API server being waited for.
ready_nodes() {
  [ "$(kubectl_ get nodes --no-headers | awk '$2 == "Ready" { n++ } END { print n + 0 }')" -ge "$nodes" ]
}
# kwok readies nodes at a few hundred a second: thousands take longer than a few.
wait_for "$nodes kwok nodes" $((120 + nodes / 20)) ready_nodes
# Pods need the namespace's default service account, made by the controller.
wait_for "default service account" 60 kubectl_ -n default get serviceaccount default

echo "up.sh: control plane up in $dir (API https://127.0.0.1:$api_port, $nodes nodes)" >&2
echo "$dir"
