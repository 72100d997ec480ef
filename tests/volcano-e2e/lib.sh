# shellcheck shell=bash
# Shared by build.sh and run.sh: where the Volcano binaries are, on top of
# tests/cluster/lib.sh (Go toolchain, control plane binaries). Sourced only.
# shellcheck disable=SC2034 # the variables are for the scripts that source this

vc_e2e_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/cluster/lib.sh
. "$vc_e2e_dir/../cluster/lib.sh"

# The Volcano release, as pinned in go.mod (the single source of truth).
vc_version=$(awk '$1 == "require" && $2 == "volcano.sh/volcano" { print $3; exit }' "$vc_e2e_dir/go.mod")
vc_dir="$k8s_cache/volcano-$vc_version"
# The suites run here, in this order by default: each needs only the API,
# phases and scheduling, bar the specs in skip.txt.
vc_suites=(admission vcctl jobp jobseq schedulingbase schedulingaction)
