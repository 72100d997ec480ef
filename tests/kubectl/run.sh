#!/usr/bin/env bash
# kubectl as a real outside client of the embedded API.
#
# Starts the API on a free loopback port, then drives it with `kubectl --server` (default,
# server-side field validation throughout): apply tephra's CRDs and a vcJob (and see a
# vcJob with an unknown field refused), get it by short name as JSON (schema defaults applied), label it,
# patch it (merge and JSON), watch (`get -w` with a timeout), delete it with garbage collection
# of a dependent, and check discovery and tables (`get nodes`, `api-resources`), imperative
# creates (`create namespace/configmap/secret`) and namespace deletion.
#
# Environment:
#   TEPHRA_APISERVER  command that starts the API; it gets `--listen 127.0.0.1:PORT` appended.
#                     Default: `tephra apiserver` from this checkout (built with cargo).
#   CRDS_DIR          CRD manifests (default: manifests/crds, tephra's CRDs)
#   VCJOB             vcJob manifest (default: tests/data/manifests/vcjob.yaml)
#   DEPLOYMENT        Deployment manifest (default: tests/data/manifests/deployment.yaml)
#
# Everything it uses is in the repository.
#
# Every apply and create runs with kubectl's default validation (`--validate=strict`): kubectl
# reads the API's OpenAPI v3 documents and leaves validation to the server
# (`?fieldValidation=Strict`), which refuses unknown fields of custom resources.
set -euo pipefail
# shellcheck source=tests/kubectl/lib.sh
. "$(dirname "$0")/lib.sh"
SUITE="kubectl"

CRDS_DIR="${CRDS_DIR:-$ROOT/manifests/crds}"
VCJOB="${VCJOB:-$ROOT/tests/data/manifests/vcjob.yaml}"
DEPLOYMENT="${DEPLOYMENT:-$ROOT/tests/data/manifests/deployment.yaml}"

need_kubectl
TEPHRA_APISERVER="${TEPHRA_APISERVER:-$(built_tephra) apiserver}"
tephra_work
start_apiserver
grep -qi "no authentication" "$LOG" || fail "the log does not say that there is no authentication"
ok "API up on port $PORT, log warns about missing authentication"

expect "nodes are Ready" "$("${K[@]}" get nodes -o jsonpath='{.items[0].status.conditions[?(@.type=="Ready")].status}')" "True"
"${K[@]}" api-resources >/dev/null || fail "api-resources"
ok "discovery"

# Imperative creates send protobuf bodies for these kinds.
"${K[@]}" create namespace team >/dev/null || fail "create namespace"
"${K[@]}" create configmap cfg -n team --from-literal=a=b >/dev/null || fail "create configmap"
"${K[@]}" create secret generic pw -n team --from-literal=pw=hunter2 >/dev/null || fail "create secret"
expect "configmap data" "$("${K[@]}" get cm cfg -n team -o jsonpath='{.data.a}')" "b"
expect "secret data" "$("${K[@]}" get secret pw -n team -o jsonpath='{.data.pw}')" "aHVudGVyMg=="
"${K[@]}" delete namespace team --wait=true --timeout=10s >/dev/null || fail "delete namespace"
"${K[@]}" get cm cfg -n team >/dev/null 2>&1 && fail "namespace content survived"
ok "imperative create (protobuf bodies) and namespace deletion"

# `create -f` with default validation; a misspelt metadata field is refused for built-in kinds.
printf 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-file\ndata:\n  a: b\n' >"$WORK/cm.yaml"
"${K[@]}" create -f "$WORK/cm.yaml" >/dev/null || fail "create -f with default validation"
expect "create -f" "$("${K[@]}" get cm from-file -o jsonpath='{.data.a}')" "b"
sed 's/^  name: from-file/  name: other\n  lables: {a: b}/' "$WORK/cm.yaml" >"$WORK/bad-cm.yaml"
OUT="$("${K[@]}" apply -f "$WORK/bad-cm.yaml" 2>&1)" && fail "unknown metadata field accepted: $OUT"
echo "$OUT" | grep -q 'unknown field "metadata.lables"' || fail "metadata strictness message: $OUT"
"${K[@]}" delete cm from-file >/dev/null || fail "delete from-file"
sed 's/^  a: b/  a: b\nimmutabel: true/' "$WORK/cm.yaml" >"$WORK/bad-cm2.yaml"
OUT="$("${K[@]}" create -f "$WORK/bad-cm2.yaml" 2>&1)" && fail "unknown built-in field accepted: $OUT"
echo "$OUT" | grep -q 'unknown field "immutabel"' || fail "built-in strictness message: $OUT"
ok "create -f and apply -f with default validation; unknown metadata and built-in fields refused"

"${K[@]}" apply -f "$DEPLOYMENT" >/dev/null || fail "apply deployment"
DEPLOY="$("${K[@]}" get deploy -o jsonpath='{.items[0].metadata.name}')"
"${K[@]}" scale deploy "$DEPLOY" --replicas=3 >/dev/null || fail "scale"
expect "scale subresource" "$("${K[@]}" get deploy "$DEPLOY" -o jsonpath='{.spec.replicas}')" "3"
"${K[@]}" delete deploy "$DEPLOY" >/dev/null || fail "delete deployment"

"${K[@]}" apply -f "$CRDS_DIR" >/dev/null || fail "apply CRDs"
"${K[@]}" wait --for condition=established --timeout=10s crd/jobs.batch.volcano.sh >/dev/null || fail "CRD established"
ok "CRDs applied (default validation) and established"

# An unknown field: refused under the default (strict) validation, with kube-apiserver's
# message; a warning under --validate=warn. Nothing is created either way but the last.
sed '0,/^spec:/s//spec:\n  notAField: 1/' "$VCJOB" >"$WORK/bad-job.yaml"
grep -q notAField "$WORK/bad-job.yaml" || fail "could not make the bad vcJob"
OUT="$("${K[@]}" apply -f "$WORK/bad-job.yaml" 2>&1)" && fail "strict validation accepted an unknown field: $OUT"
echo "$OUT" | grep -q 'strict decoding error: unknown field "spec.notAField"' || fail "strict validation message: $OUT"
OUT="$("${K[@]}" create -f "$WORK/bad-job.yaml" 2>&1)" && fail "create accepted an unknown field: $OUT"
echo "$OUT" | grep -q 'unknown field "spec.notAField"' || fail "create -f message: $OUT"
"${K[@]}" get vcjob -o name | grep -q . && fail "a refused vcJob was stored"
OUT="$("${K[@]}" apply --validate=warn -f "$WORK/bad-job.yaml" 2>&1)" || fail "apply --validate=warn: $OUT"
echo "$OUT" | grep -q 'Warning: unknown field "spec.notAField"' || fail "no warning for the unknown field: $OUT"
"${K[@]}" get vcjob -o jsonpath='{.items[0].spec}' | grep -q notAField && fail "the unknown field was stored"
"${K[@]}" delete -f "$WORK/bad-job.yaml" --wait=true --timeout=10s >/dev/null || fail "delete the warned vcJob"
ok "unknown vcJob field: refused by apply -f and create -f, a warning under --validate=warn"

"${K[@]}" apply -f "$VCJOB" >/dev/null || fail "apply vcJob"
NAME="$("${K[@]}" get vcjob -o jsonpath='{.items[0].metadata.name}')"
[ -n "$NAME" ] || fail "no vcjob listed"
JSON="$("${K[@]}" get vj "$NAME" -o json)" || fail "get by short name"
echo "$JSON" | grep -q '"kind": "Job"' || fail "get -o json is not a Job"
expect "queue set" "$("${K[@]}" get vcjob "$NAME" -o jsonpath='{.spec.queue}')" "default"
"${K[@]}" get vcjob >/dev/null || fail "table output"

"${K[@]}" label vcjob "$NAME" team=alpha >/dev/null || fail "label"
expect "label set" "$("${K[@]}" get vcjob -l team=alpha -o jsonpath='{.items[*].metadata.name}')" "$NAME"
"${K[@]}" patch vcjob "$NAME" --type merge -p '{"spec":{"maxRetry":7}}' >/dev/null || fail "merge patch"
expect "merge patch" "$("${K[@]}" get vcjob "$NAME" -o jsonpath='{.spec.maxRetry}')" "7"
"${K[@]}" patch vcjob "$NAME" --type json -p '[{"op":"replace","path":"/spec/minAvailable","value":2}]' >/dev/null || fail "json patch"
expect "json patch" "$("${K[@]}" get vcjob "$NAME" -o jsonpath='{.spec.minAvailable}')" "2"
"${K[@]}" patch vcjob "$NAME" --type json -p '[{"op":"test","path":"/spec/minAvailable","value":99}]' >/dev/null 2>&1 \
  && fail "a failing JSON patch test op was accepted"
ok "failing JSON patch refused"

# Watch: changes made while `get -w` runs are printed; the request timeout ends it.
"${K[@]}" get configmaps -w --request-timeout=4s >"$WORK/watch.out" 2>&1 &
WATCH=$!
sleep 1
UID_="$("${K[@]}" get vcjob "$NAME" -o jsonpath='{.metadata.uid}')"
cat <<EOF | "${K[@]}" apply -f - >/dev/null || fail "create dependent"
apiVersion: v1
kind: ConfigMap
metadata:
  name: owned-by-job
  ownerReferences:
  - apiVersion: batch.volcano.sh/v1alpha1
    kind: Job
    name: $NAME
    uid: $UID_
    controller: true
    blockOwnerDeletion: true
data:
  a: b
EOF
wait "$WATCH" || true
grep -q owned-by-job "$WORK/watch.out" || fail "get -w did not show the new configmap: $(cat "$WORK/watch.out")"
ok "get -w saw the change and ended at its timeout"

"${K[@]}" delete vcjob "$NAME" --wait=true --timeout=10s >/dev/null || fail "delete vcjob"
"${K[@]}" get vcjob "$NAME" >/dev/null 2>&1 && fail "vcjob still there"
for _ in $(seq 1 50); do
  "${K[@]}" get configmap owned-by-job >/dev/null 2>&1 || break
  sleep 0.1
done
"${K[@]}" get configmap owned-by-job >/dev/null 2>&1 && fail "dependent configmap not garbage collected"
ok "delete cascaded to the dependent"

OUT="$("${K[@]}" get vcjob "$NAME" 2>&1 || true)"
echo "$OUT" | grep -q NotFound || fail "missing object is not a NotFound Status: $OUT"
ok "NotFound for a deleted object"
# A pod the kubelet stand-in runs for 1 s and ends with exit code 3; `kubectl logs` shows the
# simulated log (there is no container runtime).
"${K[@]}" apply -f - >/dev/null <<EOF || fail "apply simulated pod"
apiVersion: v1
kind: Pod
metadata:
  name: sim
  namespace: default
  annotations:
    simulation.tephra.io/run-seconds: "1"
    simulation.tephra.io/exit-code: "3"
spec:
  nodeName: node-1
  restartPolicy: Never
  containers:
  - name: main
    image: busybox
EOF
for _ in $(seq 1 50); do
  [ "$("${K[@]}" get pod sim -o jsonpath='{.status.phase}')" = Failed ] && break
  sleep 0.1
done
expect "simulated pod failed with its exit code" "$("${K[@]}" get pod sim -o jsonpath='{.status.containerStatuses[0].state.terminated.exitCode}')" "3"
"${K[@]}" logs sim | grep -q "exit code 3" || fail "kubectl logs did not show the simulated exit"
ok "kubectl logs shows the simulated container log"

echo "all kubectl checks passed"
echo "kubectl: $PASSED passed, 0 failed"
