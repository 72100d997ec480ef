#!/usr/bin/env bash
# tephra's monitoring with the real tools:
#  1. promtool check rules (manifests/monitoring/tephra-rules.yaml) and promtool test rules
#     (tests/install/rules-test.yaml: which alerts fire when, what the recording rules yield);
#  2. a real Prometheus on 127.0.0.1 scraping `tephra serve --embedded` every second, with the
#     rules loaded, while vcJobs run: one that completes, one that keeps running, one too big
#     to ever fit (a waiting gang), plus one malformed call to a webhook and to the extender
#     (so the error series the panels and rules read exist);
#  3. tests/install/check_exprs.py: every expression of the rules and of the Grafana dashboard
#     against that Prometheus (see that file for exactly what passes).
#
# Environment:
#   TEPHRA_BIN  the tephra binary (default: built with cargo from this checkout)
# Needs promtool and prometheus (Debian: apt-get install prometheus), kubectl, curl, python3
# with PyYAML.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
RULES="$ROOT/manifests/monitoring/tephra-rules.yaml"
DASHBOARD="$ROOT/manifests/monitoring/tephra-dashboard.json"
for tool in promtool prometheus kubectl curl python3; do
  command -v "$tool" >/dev/null || { echo "monitoring.sh: $tool not installed" >&2; exit 1; }
done
if [ -z "${TEPHRA_BIN:-}" ]; then
  (cd "$ROOT" && cargo build -q --bin tephra)
  TEPHRA_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/debug/tephra"
fi

PASSED=0
ok() { PASSED=$((PASSED + 1)); echo "ok - $*"; }
fail() {
  echo "monitoring.sh: $PASSED passed, 1 failed" >&2; echo "FAIL: $*" >&2
  [ -n "${WORK:-}" ] && for log in "$WORK"/*.log; do echo "--- $log" >&2; tail -n 20 "$log" >&2; done
  exit 1
}

promtool check rules "$RULES" >/dev/null || fail "promtool check rules: $(promtool check rules "$RULES" 2>&1)"
ok "promtool check rules: $(promtool check rules "$RULES" | grep -o '[0-9]* rules found')"
(cd "$ROOT/tests/install" && promtool test rules rules-test.yaml) >/dev/null 2>&1 \
  || fail "promtool test rules: $(cd "$ROOT/tests/install" && promtool test rules rules-test.yaml 2>&1)"
ok "promtool test rules tests/install/rules-test.yaml"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
API_PORT=$(free_port) HTTPS_PORT=$(free_port) METRICS_PORT=$(free_port) PROM_PORT=$(free_port)
WORK="$(mktemp -d)"
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

"$TEPHRA_BIN" serve --embedded --embedded-api-listen "127.0.0.1:$API_PORT" \
  --listen "127.0.0.1:$HTTPS_PORT" --metrics-listen "127.0.0.1:$METRICS_PORT" >"$WORK/tephra.log" 2>&1 &
PIDS+=($!)

# Prometheus scrapes tephra every second and evaluates the rules every second, with the label
# job="tephra" the ServiceMonitor sets in a cluster.
cat >"$WORK/prometheus.yml" <<YAML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: ["$RULES"]
scrape_configs:
  - job_name: tephra
    static_configs:
      - targets: ["127.0.0.1:$METRICS_PORT"]
YAML
promtool check config "$WORK/prometheus.yml" >/dev/null || fail "promtool check config"
prometheus --config.file="$WORK/prometheus.yml" --storage.tsdb.path="$WORK/data" \
  --web.listen-address="127.0.0.1:$PROM_PORT" --log.level=warn >"$WORK/prometheus.log" 2>&1 &
PIDS+=($!)
PROM="http://127.0.0.1:$PROM_PORT"

K=(kubectl --server "http://127.0.0.1:$API_PORT" --kubeconfig /dev/null --request-timeout=10s)
for _ in $(seq 1 300); do
  "${K[@]}" get queue default >/dev/null 2>&1 && curl -fs "$PROM/-/ready" >/dev/null 2>&1 && break
  sleep 0.1
done
"${K[@]}" get queue default >/dev/null 2>&1 || fail "tephra serve --embedded not ready in 30s"
curl -fs "$PROM/-/ready" >/dev/null || fail "Prometheus not ready in 30s"
# up == 1: Prometheus reads tephra's /metrics.
for _ in $(seq 1 100); do
  curl -fs "$PROM/api/v1/query?query=up%7Bjob%3D%22tephra%22%7D%3D%3D1" | grep -q '"value"' && break
  sleep 0.1
done
curl -fs "$PROM/api/v1/query?query=up%7Bjob%3D%22tephra%22%7D%3D%3D1" | grep -q '"value"' || fail "Prometheus does not scrape tephra"
ok "Prometheus $(prometheus --version 2>&1 | head -n 1 | awk '{print $3}') scrapes tephra serve --embedded"

# The workload, started after Prometheus so that the counters' increases are seen.
JOB="$ROOT/tests/data/manifests/vcjob-run.yaml"
"${K[@]}" apply -f "$JOB" >/dev/null || fail "apply vcjob hello-gang"
sed 's/name: hello-gang/name: long/; s/run-seconds: "2"/run-seconds: "3600"/' "$JOB" | "${K[@]}" apply -f - >/dev/null || fail "apply vcjob long"
# 20 cpu per pod on nodes of 8: this gang never fits and waits.
sed 's/name: hello-gang/name: too-big/; s/cpu: 500m/cpu: "20"/' "$JOB" | "${K[@]}" apply -f - >/dev/null || fail "apply vcjob too-big"
"${K[@]}" wait --for=jsonpath='{.status.state.phase}'=Completed vcjob/hello-gang --timeout=60s >/dev/null || fail "hello-gang did not complete"
"${K[@]}" wait --for=jsonpath='{.status.state.phase}'=Running vcjob/long --timeout=60s >/dev/null || fail "long did not start"
ok "vcJobs: hello-gang Completed, long Running, too-big waiting"
# What kube-apiserver or kube-scheduler would never send: counted as errors. Sent a few times
# over several scrapes: a rate needs the counter to rise between two samples, and the jobs'
# reviews (CREATE only) and, with binding ahead, a small gang's extender calls can all fall
# before the first one.
for _ in 1 2 3; do
  code=$(curl -sk -o /dev/null -w '%{http_code}' -X POST "https://127.0.0.1:$HTTPS_PORT/jobs/validate" -d 'not json')
  [ "$code" = 400 ] || fail "a malformed AdmissionReview got $code, want 400"
  code=$(curl -sk -o /dev/null -w '%{http_code}' -X POST "https://127.0.0.1:$HTTPS_PORT/scheduler/filter" -d 'not json')
  [ "$code" = 400 ] || fail "a malformed filter call got $code, want 400"
  sleep 1.5
done
ok "malformed webhook and extender calls answered 400"

start=$(date +%s)
python3 "$ROOT/tests/install/check_exprs.py" --prometheus "$PROM" --rules "$RULES" --dashboard "$DASHBOARD" \
  --pending tephra_leader_is_leader --pending tephra_tls_certificate_expiry_timestamp_seconds \
  --timeout 90 >"$WORK/check.txt" 2>&1 || { cat "$WORK/check.txt"; fail "expressions without data (above)"; }
cat "$WORK/check.txt"
ok "every rule and dashboard expression checked against Prometheus ($(( $(date +%s) - start ))s)"

# The check itself can fail: a recording rule over a metric tephra does not export, and an
# alert reading one, are reported as failures.
cat >"$WORK/bad-rules.yaml" <<'YAML'
groups:
  - name: bad
    rules:
      - record: bad:misspelt
        expr: sum(tephra_admision_requests_total)
      - alert: BadMisspelt
        expr: rate(tephra_extender_request_total[5m]) > 0
YAML
echo '{"panels": []}' >"$WORK/empty-dashboard.json"
if python3 "$ROOT/tests/install/check_exprs.py" --prometheus "$PROM" --rules "$WORK/bad-rules.yaml" \
  --dashboard "$WORK/empty-dashboard.json" --timeout 0 >"$WORK/bad.txt" 2>&1; then
  fail "check_exprs.py passed misspelt metrics: $(cat "$WORK/bad.txt")"
fi
for want in '^fail    record bad:misspelt: no data' '^fail    alert BadMisspelt: metric tephra_extender_request_total has no series'; do
  grep -q "$want" "$WORK/bad.txt" || fail "check_exprs.py did not say '$want': $(cat "$WORK/bad.txt")"
done
ok "check_exprs.py fails on misspelt metrics"

# The waiting gang is what TephraGangWaitingTooLong watches: its series is there now, and the
# alert is pending (it fires after 30 minutes).
for _ in $(seq 1 100); do
  curl -fs "$PROM/api/v1/alerts" | grep -q '"alertname":"TephraGangWaitingTooLong".*"state":"pending"' && break
  sleep 0.2
done
curl -fs "$PROM/api/v1/alerts" | grep -q '"alertname":"TephraGangWaitingTooLong".*"state":"pending"' \
  || fail "TephraGangWaitingTooLong is not pending for the too-big gang: $(curl -fs "$PROM/api/v1/alerts")"
curl -fs "$PROM/api/v1/alerts" | grep -o '"job_id":"default/too-big-[^"]*"' | head -n 1 | grep -q too-big \
  || fail "the pending alert is not about too-big"
ok "TephraGangWaitingTooLong pending for default/too-big"
echo "monitoring.sh: $PASSED passed"
