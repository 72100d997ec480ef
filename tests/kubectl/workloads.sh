#!/usr/bin/env bash
# The controller-manager stand-in with kubectl as the user's tool, under
# `tephra serve --embedded`: Volcano's own Deployment example (`deployment/deployment.yaml`
# with its queue) gets a ReplicaSet and running pods and `kubectl rollout status` succeeds;
# scaling and a new image roll out; a StatefulSet gets ordinal pods; a batch Job completes.
#
# Environment:
#   TEPHRA_BIN         the tephra binary (default: built with cargo from this checkout)
#   TEPHRA_VOLCANO_FIXTURES  the folder of Volcano's fixtures (as for cargo test; .ci/run sets
#                      it): named, its volcano-examples/ must exist or the test fails; unset,
#                      ../shared/fixtures next to the checkout is used and the test is skipped
#                      with a message when it is absent (a fresh clone)
set -euo pipefail
# shellcheck source=tests/kubectl/lib.sh
. "$(dirname "$0")/lib.sh"
SUITE="kubectl workloads"

need_kubectl
if [ -n "${TEPHRA_VOLCANO_FIXTURES:-}" ]; then
  EXAMPLES="$TEPHRA_VOLCANO_FIXTURES/volcano-examples"
  [ -f "$EXAMPLES/deployment__deployment.yaml" ] || {
    echo "FAIL: TEPHRA_VOLCANO_FIXTURES is set but $EXAMPLES/deployment__deployment.yaml is missing" >&2
    exit 1
  }
else
  EXAMPLES="$ROOT/../shared/fixtures/volcano-examples"
  if [ ! -f "$EXAMPLES/deployment__deployment.yaml" ]; then
    echo "skipped: Volcano's examples not found at $EXAMPLES (set TEPHRA_VOLCANO_FIXTURES); the workload stand-in test needs them"
    exit 0
  fi
fi
TEPHRA_BIN="${TEPHRA_BIN:-$(built_tephra)}"
tephra_work
serve_embedded

# eventually DESCRIPTION SECONDS COMMAND...: polls COMMAND's output until it is non-empty and
# not "0" (every 0.2 s). When it never is, the failure shows the PodGroups and pods as they
# are then, so a failure in CI says which step stalled.
eventually() {
  local what="$1" secs="$2"; shift 2
  for _ in $(seq 1 $((secs * 5))); do
    out="$("$@" 2>/dev/null || true)"
    [ -n "$out" ] && [ "$out" != "0" ] && { ok "$what"; return; }
    sleep 0.2
  done
  {
    echo "--- PodGroups (phase, conditions) and pods when it failed"
    "${K[@]}" get podgroups -o jsonpath='{range .items[*]}{.metadata.name} {.status.phase} {.status.conditions}{"\n"}{end}' 2>&1
    "${K[@]}" get pods -o wide 2>&1
  } >&2
  fail "$what (within ${secs}s)"
}
count() { "${K[@]}" get "$@" -o name | wc -l | tr -d ' '; }
running() { "${K[@]}" get pods -l "$1" --field-selector=status.phase=Running -o name | wc -l | tr -d ' '; }
# statefulset NAME [ANNOTATION] [SCHEDULER]: a two-replica StatefulSet of nginx pods labelled
# app=NAME, with one annotation (`key: "value"`) and a schedulerName when given.
statefulset() {
  local name="$1" annotations="" pod_spec=""
  [ -z "${2:-}" ] || annotations=", annotations: {$2}"
  [ -z "${3:-}" ] || pod_spec="schedulerName: $3, "
  cat <<YAML
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: $name$annotations}
spec:
  serviceName: $name
  replicas: 2
  selector: {matchLabels: {app: $name}}
  template:
    metadata: {labels: {app: $name}}
    spec: {${pod_spec}containers: [{name: c, image: nginx:1.27}]}
YAML
}

# Volcano's Deployment example, with its queue. The example file has no final newline.
{ cat "$EXAMPLES/deployment__queue.yaml"; echo; echo "---"; cat "$EXAMPLES/deployment__deployment.yaml"; echo; } \
  | "${K[@]}" apply -f - >/dev/null || fail "apply Volcano's deployment example"
"${K[@]}" rollout status deploy/deploy-with-volcano --timeout=60s >/dev/null \
  || fail "rollout status of deploy-with-volcano"
ok "kubectl rollout status deploy/deploy-with-volcano"
expect "one running pod" "$(running app=nginx)" "1"
RS="$("${K[@]}" get rs -l app=nginx -o jsonpath='{.items[0].metadata.name}')"
HASH="$("${K[@]}" get rs "$RS" -o jsonpath='{.metadata.labels.pod-template-hash}')"
expect "the ReplicaSet is named after the template hash" "$RS" "deploy-with-volcano-$HASH"
expect "revision 1" "$("${K[@]}" get rs "$RS" -o jsonpath='{.metadata.annotations.deployment\.kubernetes\.io/revision}')" "1"
expect "the pod is the ReplicaSet's" "$("${K[@]}" get pods -l app=nginx -o jsonpath='{.items[0].metadata.ownerReferences[0].name}')" "$RS"
expect "the pod went to Volcano's queue" "$("${K[@]}" get pods -l app=nginx -o jsonpath='{.items[0].spec.schedulerName}')" "volcano"
expect "deployment status" "$("${K[@]}" get deploy deploy-with-volcano -o jsonpath='{.status.readyReplicas}/{.status.availableReplicas}/{.status.updatedReplicas}')" "1/1/1"

expect "kubectl get pods columns" "$(header pods)" "NAME READY STATUS RESTARTS AGE"
expect "kubectl get pods -o wide columns" "$(header pods -o wide)" "NAME READY STATUS RESTARTS AGE IP NODE NOMINATED NODE READINESS GATES"
expect "kubectl get deploy columns" "$(header deploy)" "NAME READY UP-TO-DATE AVAILABLE AGE"
expect "kubectl get rs columns" "$(header rs)" "NAME DESIRED CURRENT READY AGE"
expect "kubectl get nodes columns" "$(header nodes)" "NAME STATUS ROLES AGE VERSION"
expect "kubectl get deploy row" "$("${K[@]}" get deploy deploy-with-volcano --no-headers | tr -s ' ' | cut -d' ' -f1-4)" "deploy-with-volcano 1/1 1 1"

"${K[@]}" scale deploy/deploy-with-volcano --replicas=3 >/dev/null || fail "scale to 3"
"${K[@]}" rollout status deploy/deploy-with-volcano --timeout=60s >/dev/null || fail "rollout after scale"
expect "three running pods after scaling" "$(running app=nginx)" "3"

"${K[@]}" set image deploy/deploy-with-volcano nginx=nginx:1.27 >/dev/null || fail "set image"
"${K[@]}" rollout status deploy/deploy-with-volcano --timeout=90s >/dev/null || fail "rollout of the new image"
ok "rolling update to nginx:1.27"
expect "two ReplicaSets" "$(count rs -l app=nginx)" "2"
NEW="$("${K[@]}" get deploy deploy-with-volcano -o jsonpath='{.status.updatedReplicas}')"
expect "all replicas updated" "$NEW" "3"
eventually "the old pods are gone" 30 bash -c "[ \"\$(${K[*]} get pods -l app=nginx -o jsonpath='{.items[*].spec.containers[0].image}' | tr ' ' '\n' | sort -u)\" = nginx:1.27 ] && echo yes"

# A StatefulSet: ordinal pods, one at a time, placed through tephra's extender.
statefulset web "" volcano | "${K[@]}" apply -f - >/dev/null || fail "apply a StatefulSet"
"${K[@]}" rollout status sts/web --timeout=60s >/dev/null || fail "rollout status of sts/web"
ok "kubectl rollout status sts/web"
expect "ordinal pod names" "$("${K[@]}" get pods -l app=web -o jsonpath='{.items[*].metadata.name}' | tr ' ' '\n' | sort | tr '\n' ' ')" "web-0 web-1 "
expect "pod-name label" "$("${K[@]}" get pod web-1 -o jsonpath='{.metadata.labels.statefulset\.kubernetes\.io/pod-name}')" "web-1"

# A gang StatefulSet with the default OrderedReady policy can never start (the second pod is
# made only once the first runs, and the first waits for the second): kubectl shows the
# webhook's warning, and the PodGroup's condition names the cause.
WARN="$(statefulset ordered 'scheduling.volcano.sh/group-min-member: "2"' | "${K[@]}" apply -f - 2>&1 >/dev/null)" || fail "apply the ordered StatefulSet: $WARN"
case "$WARN" in
  *"Warning: scheduling.volcano.sh/group-min-member 2 with podManagementPolicy OrderedReady (the default) can never start"*"set spec.podManagementPolicy: Parallel"*) ok "kubectl apply warns that an OrderedReady gang can never start" ;;
  *) fail "no warning for the OrderedReady gang: '$WARN'" ;;
esac
ORDERED_PG="podgroup-$("${K[@]}" get sts ordered -o jsonpath='{.metadata.uid}')"
eventually "the PodGroup's condition names OrderedReady" 30 bash -c "${K[*]} get podgroup $ORDERED_PG -o jsonpath='{.status.conditions[*].message}' | grep -o 'podManagementPolicy OrderedReady and makes each pod only once the one before is Ready'"
"${K[@]}" delete sts ordered --wait=false >/dev/null

# A batch Job: two completions, one at a time.
cat <<'YAML' | "${K[@]}" apply -f - >/dev/null || fail "apply a batch Job"
apiVersion: batch/v1
kind: Job
metadata: {name: twice}
spec:
  completions: 2
  parallelism: 1
  template:
    metadata:
      annotations: {simulation.tephra.io/run-seconds: "0.5"}
    spec:
      restartPolicy: Never
      schedulerName: volcano
      containers: [{name: c, image: busybox}]
YAML
"${K[@]}" wait --for=condition=complete job/twice --timeout=60s >/dev/null || fail "job/twice did not complete"
ok "kubectl wait --for=condition=complete job/twice"
expect "two succeeded pods" "$("${K[@]}" get job twice -o jsonpath='{.status.succeeded}')" "2"
expect "kubectl get job row" "$("${K[@]}" get job twice --no-headers | tr -s ' ' | cut -d' ' -f1-3)" "twice Complete 2/2"
expect "kubectl get sts columns" "$(header sts)" "NAME READY AGE"

echo "kubectl workloads: $PASSED passed"
