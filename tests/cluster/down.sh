#!/usr/bin/env bash
# Stops what up.sh started in state folder DIR (by the pids it recorded, never
# by name) and removes DIR.
# Usage: down.sh [DIR]   (default $TEPHRA_CLUSTER_DIR)
set -euo pipefail

dir=${1:-${TEPHRA_CLUSTER_DIR:-}}
if [ -z "$dir" ] || [ ! -f "$dir/.tephra-cluster" ]; then
  echo "down.sh: '$dir' is not a folder made by up.sh" >&2
  exit 2
fi

# Reverse order of start, so nothing restarts work against a dying API.
pids=()
for name in kwok kube-scheduler-default kube-scheduler kube-controller-manager kube-apiserver etcd; do
  f=$dir/pids/$name.pid
  [ -f "$f" ] || continue
  pid=$(cat "$f")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    pids+=("$pid")
  fi
done
# Give each up to 10 s to exit cleanly, then force.
for pid in "${pids[@]}"; do
  for ((i = 0; i < 100; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -9 "$pid" 2>/dev/null || true
done
rm -rf "$dir"
