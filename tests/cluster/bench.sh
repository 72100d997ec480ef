#!/usr/bin/env bash
# The placement benchmark: pods placed per second by kube-scheduler alone and
# with tephra as its extender, plain pods and gangs, on kwok nodes.
# Usage: bench.sh [NODES]   (default 1000; TEPHRA_BENCH_PODS=5000, TEPHRA_BENCH_GANGS=500)
# See bench-body.sh for what is measured.
set -euo pipefail
export TEPHRA_CLUSTER_BENCH=1 TEPHRA_CLUSTER_NODES="${1:-1000}"
export TEPHRA_SCHEDULER_QPS="${TEPHRA_SCHEDULER_QPS:-5000}"
exec "$(dirname "$0")/run.sh"
