# shellcheck shell=bash
# Brings up the control plane (up.sh) with kube-scheduler using tephra as its
# extender and installs tephra the way the README's "Deploying to a cluster"
# says for a tephra running outside the cluster. Sourced by run.sh and by
# tests/volcano-e2e/run.sh, never run.
#
# Needs: $work (an empty folder of the caller's, removed by it), $nodes,
# $TEPHRA_BIN, and lib.sh sourced. Optional: the array tephra_serve_args,
# extra flags for `tephra serve` (e.g. --config FILE).
# Sets: tephra_port, metrics_port, cluster_up=1, KUBECONFIG (exported), the
# function k (kubectl with a timeout), start_tephra and stop_tephra (tephra's
# pid in tephra_pid, its log in $work/tephra.log); install log $work/install.log.
# shellcheck disable=SC2034,SC2154 # set here for, and given by, the script that sources this

start_tephra() {
  "$TEPHRA_BIN" serve --kubeconfig "$work/tephra.kubeconfig" \
    --listen "127.0.0.1:$tephra_port" --metrics-listen "127.0.0.1:$metrics_port" \
    --tls-cert "$work/tls/tls.crt" --tls-key "$work/tls/tls.key" \
    ${tephra_serve_args[@]+"${tephra_serve_args[@]}"} \
    >>"$work/tephra.log" 2>&1 &
  tephra_pid=$!
  # Every 0.1 s, for up to TEPHRA_READY_TIMEOUT s (60): the scale harness times this.
  local i
  for ((i = 0; i < ${TEPHRA_READY_TIMEOUT:-60} * 10; i++)); do
    curl -sf "http://127.0.0.1:$metrics_port/readyz" >/dev/null 2>&1 && return 0
    kill -0 "$tephra_pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "run.sh: tephra serve did not become ready" >&2
  tail -n 30 "$work/tephra.log" >&2
  return 1
}
stop_tephra() {
  [ -n "$tephra_pid" ] || return 0
  kill "$tephra_pid" 2>/dev/null || true
  local i
  for ((i = 0; i < 100; i++)); do
    kill -0 "$tephra_pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -9 "$tephra_pid" 2>/dev/null || true
  wait "$tephra_pid" 2>/dev/null || true
  tephra_pid=""
}

read -r tephra_port metrics_port < <(python3 -c '
import socket
a, b = socket.socket(), socket.socket()
a.bind(("127.0.0.1", 0)); b.bind(("127.0.0.1", 0))
print(a.getsockname()[1], b.getsockname()[1])')

# tephra's serving certificate, made the README's way, plus the address the
# API server and kube-scheduler reach it at (no Service routing without
# kube-proxy, so webhooks and extender use URLs on loopback).
"$TEPHRA_BIN" certs --service tephra --namespace tephra-system --extra-name 127.0.0.1 \
  --out "$work/tls" >"$work/ca-bundle"

TEPHRA_CLUSTER_DIR="$work/cluster" \
  TEPHRA_EXTENDER_URL="https://127.0.0.1:$tephra_port/scheduler" \
  TEPHRA_EXTENDER_CA="$work/tls/ca.crt" \
  "$cluster_dir/up.sh" "$nodes" >/dev/null
cluster_up=1
export KUBECONFIG="$work/cluster/kubeconfig"
k() { kubectl --request-timeout=20s "$@"; }

# --- a cluster set up out of order -----------------------------------------------
# Started before anything of tephra's is in the cluster, tephra stays up with /readyz
# failing, its log names what is missing and the command that fixes it, and it is ready
# once the CRDs and the Lease's namespace appear, without a restart. (Admin credentials:
# its service account does not exist yet; the Lease goes to a namespace of this check's own.)
order_ns=tephra-order-check
read -r order_port order_metrics < <(python3 -c '
import socket
a, b = socket.socket(), socket.socket()
a.bind(("127.0.0.1", 0)); b.bind(("127.0.0.1", 0))
print(a.getsockname()[1], b.getsockname()[1])')
order_log=$work/order-check.log
order_fail() {
  echo "run.sh: out-of-order set-up: $1" >&2
  tail -n 30 "$order_log" >&2
  kill "$order_pid" 2>/dev/null || true
  exit 1
}
"$TEPHRA_BIN" serve --kubeconfig "$KUBECONFIG" \
  --listen "127.0.0.1:$order_port" --metrics-listen "127.0.0.1:$order_metrics" \
  --tls-cert "$work/tls/tls.crt" --tls-key "$work/tls/tls.key" \
  --leader-elect-namespace "$order_ns" >"$order_log" 2>&1 &
order_pid=$!
for ((i = 0; i < 60; i++)); do
  grep -qs 'WARN.*tephra crds | kubectl apply -f -' "$order_log" \
    && grep -qs "WARN.*kubectl create namespace $order_ns" "$order_log" && break
  kill -0 "$order_pid" 2>/dev/null || order_fail "tephra exited"
  sleep 0.5
done
grep -q 'WARN.*tephra crds | kubectl apply -f -' "$order_log" || order_fail "no WARN names the CRDs' fix"
grep -q "WARN.*kubectl create namespace $order_ns" "$order_log" || order_fail "no WARN names the namespace's fix"
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$order_metrics/readyz" || true)
[ "$code" = 503 ] || order_fail "/readyz answered $code without CRDs and namespace, not 503"
{
  k apply -f "$repo_dir/manifests/crds/"
  k create namespace "$order_ns"
} >>"$work/install.log" 2>&1 || order_fail "applying the CRDs and the namespace failed"
for ((i = 0; i < 120; i++)); do
  curl -sf "http://127.0.0.1:$order_metrics/readyz" >/dev/null 2>&1 && break
  kill -0 "$order_pid" 2>/dev/null || order_fail "tephra exited once they appeared"
  sleep 0.5
done
curl -sf "http://127.0.0.1:$order_metrics/readyz" >/dev/null 2>&1 || order_fail "not ready 60 s after the CRDs and namespace appeared"
kill "$order_pid"
wait "$order_pid" || order_fail "exit after SIGTERM was not 0"
k delete namespace "$order_ns" --wait=false >/dev/null 2>&1 || true
echo "run.sh: out-of-order set-up: tephra waited, named the fixes, and was ready once they were applied"

# --- install tephra as the README says ------------------------------------------
install_log=$work/install.log
{
  k apply -f "$repo_dir/manifests/crds/"
  k apply -f "$repo_dir/manifests/namespace.yaml" -f "$repo_dir/manifests/rbac.yaml"
  # What runs in a pod elsewhere is only checked here: the API server must
  # accept the Deployment, Service and tephra's own kube-scheduler as written.
  k -n tephra-system create secret tls tephra-tls --cert="$work/tls/tls.crt" --key="$work/tls/tls.key"
  k apply --dry-run=server -f "$repo_dir/manifests/deployment.yaml"
  k apply --dry-run=server -f "$repo_dir/manifests/kube-scheduler.yaml"
} >"$install_log" 2>&1 || { cat "$install_log" >&2; exit 1; }
crds_established 60 "$repo_dir/manifests/crds/" || { echo "tephra's CRDs not established after 60 s" >&2; exit 1; }

# tephra runs with its own service account's permissions (manifests/rbac.yaml),
# as it would in its pod, through a kubeconfig holding a token for it.
sa_token=$(k -n tephra-system create token tephra --duration=2h)
server=$(k config view --raw -o jsonpath='{.clusters[0].cluster.server}')
cat >"$work/tephra.kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "$server", certificate-authority: "$work/cluster/pki/ca.crt"}
users:
- name: tephra
  user: {token: "$sa_token"}
contexts:
- name: c
  context: {cluster: c, user: tephra, namespace: tephra-system}
current-context: c
KC

start_tephra

# The webhooks as the README applies them, with the out-of-cluster change the
# README describes: each `service:` reference becomes a URL on loopback.
sed -e "s|caBundle: Cg==|caBundle: $(cat "$work/ca-bundle")|" \
  -e "s|service: {name: tephra, namespace: tephra-system, path: \([^,]*\), port: 443}|url: https://127.0.0.1:$tephra_port\1|" \
  "$repo_dir/manifests/webhooks.yaml" | k apply -f - >>"$install_log" 2>&1 \
  || { cat "$install_log" >&2; exit 1; }

# tephra makes the built-in `default` and `root` queues once it runs (through its
# own queue webhooks); every scenario needs them.
for ((i = 0; i < 120; i++)); do
  k get queue default >/dev/null 2>&1 && break
  sleep 0.5
done
k get queue default >/dev/null || { echo "run.sh: tephra made no queue default in 60 s" >&2; tail -n 30 "$work/tephra.log" >&2; exit 1; }

