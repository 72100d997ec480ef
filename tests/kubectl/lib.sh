# Shared by the scripts of tests/kubectl, which source it after `set -euo pipefail`: the
# tephra binary, a server on a free loopback port (killed when the script exits, however it
# exits), kubectl pointed at it, and the ok/fail lines every script prints.
#
# A script sets SUITE (the name its summary lines start with) and calls, in order:
#   need_kubectl; tephra_work; start_apiserver | serve_embedded
# then checks with ok, fail and expect, and ends with its own summary line.
#
# Variables it sets: ROOT (the checkout), WORK (a temporary folder), PORT, SERVER (the server's
# pid), LOG (the server's output), K (kubectl against the server, as an array), PASSED.

# shellcheck shell=bash

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
SUITE="$(basename "$0" .sh)"
PASSED=0
WORK=""
SERVER=""
LOG=""

# need_kubectl: ends the script with success, saying so, on a machine without kubectl.
need_kubectl() {
  command -v kubectl >/dev/null || { echo "kubectl not installed; skipping"; exit 0; }
}

# built_tephra: builds the tephra binary of this checkout with cargo and prints its path (for a
# TEPHRA_BIN or TEPHRA_APISERVER the caller did not give).
built_tephra() {
  (cd "$ROOT" && cargo build -q --bin tephra) >&2
  echo "${CARGO_TARGET_DIR:-$ROOT/target}/debug/tephra"
}

# free_port: a free TCP port on 127.0.0.1 (a random high one where python3 is missing).
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null \
    || echo $((20000 + RANDOM % 20000))
}

# tephra_work: makes WORK and arranges that the server (once started) is stopped and WORK
# removed when the script exits.
tephra_work() {
  WORK="$(mktemp -d)"
  trap stop_tephra EXIT
}

# stop_tephra: the EXIT trap of tephra_work.
stop_tephra() {
  [ -z "$SERVER" ] || { kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; }
  rm -rf "$WORK"
}

# kubectl_at URL: points K at the plain-HTTP API at URL, with no kubeconfig.
kubectl_at() {
  K=(kubectl --server "$1" --kubeconfig /dev/null --request-timeout=10s)
}

# await_server NAME TRIES COMMAND...: runs COMMAND every 0.1 s until it succeeds, at most TRIES
# times; fails the script when the server exits first or COMMAND never succeeds.
await_server() {
  local name="$1" tries="$2"
  shift 2
  for _ in $(seq 1 "$tries"); do
    "$@" >/dev/null 2>&1 && return 0
    kill -0 "$SERVER" 2>/dev/null || fail "$name exited"
    sleep 0.1
  done
  "$@" >/dev/null 2>&1 || fail "$name not ready"
}

# start_apiserver: starts $TEPHRA_APISERVER (a command; it gets `--listen 127.0.0.1:PORT`) on a
# free port and waits (at most 10 s) until it answers /healthz.
start_apiserver() {
  PORT="$(free_port)"
  LOG="$WORK/apiserver.log"
  # The command is words to split (`tephra apiserver`, or another server's command line).
  # shellcheck disable=SC2086
  $TEPHRA_APISERVER --listen "127.0.0.1:$PORT" >"$LOG" 2>&1 &
  SERVER=$!
  kubectl_at "http://127.0.0.1:$PORT"
  await_server "API server" 100 "${K[@]}" get --raw /healthz
}

# serve_embedded: starts `$TEPHRA_BIN serve --embedded` with its API on a free port and waits
# (at most 30 s) until the root queue exists: by then the CRDs are installed, the webhooks
# registered and the controllers started.
serve_embedded() {
  PORT="$(free_port)"
  LOG="$WORK/serve.log"
  "$TEPHRA_BIN" serve --embedded --embedded-api-listen "127.0.0.1:$PORT" \
    --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 >"$LOG" 2>&1 &
  SERVER=$!
  kubectl_at "http://127.0.0.1:$PORT"
  await_server "tephra serve --embedded" 300 "${K[@]}" get queue root
  ok "serve --embedded up on port $PORT"
}

# ok DESCRIPTION: one passed check.
ok() {
  PASSED=$((PASSED + 1))
  echo "ok - $*"
}

# fail DESCRIPTION: the summary line, the reason and the end of the server's log; exit 1.
fail() {
  echo "$SUITE: $PASSED passed, 1 failed"
  echo "FAIL: $*" >&2
  if [ -n "$LOG" ] && [ -f "$LOG" ]; then
    echo "--- $(basename "$LOG" .log) log" >&2
    tail -n 40 "$LOG" >&2
  fi
  exit 1
}

# expect DESCRIPTION ACTUAL WANTED: ok when ACTUAL is WANTED, else fail showing both (on lines
# of their own when either has several).
expect() {
  if [ "$2" = "$3" ]; then
    ok "$1"
  elif [[ "$2$3" == *$'\n'* ]]; then
    fail "$1: got
$2
want
$3"
  else
    fail "$1: got '$2', want '$3'"
  fi
}

# wait_phase JOB PHASE SECONDS: waits until vcjob/JOB is in PHASE, or fails.
wait_phase() {
  "${K[@]}" wait --for=jsonpath='{.status.state.phase}'="$2" "vcjob/$1" --timeout="${3}s" >/dev/null \
    || fail "vcjob/$1 did not reach $2 in ${3}s (it is '$("${K[@]}" get vcjob "$1" -o jsonpath='{.status.state.phase}')')"
}

# header ARGS...: the column names of `kubectl get ARGS`, one space between them.
header() {
  "${K[@]}" get "$@" 2>/dev/null | sed -n 1p | tr -s ' ' | sed 's/ $//'
}
