#!/usr/bin/env bash
# What kubectl shows, against tephra's embedded API and (with FIDELITY_KUBECONFIG) against a
# real kube-apiserver: the headers of `kubectl get` per built-in kind, narrow and `-o wide`;
# `kubectl get -w` and `--watch-only` (rows in the list's columns); `--sort-by` of pods and
# events; `kubectl explain` of built-in kinds' and CRDs' fields (with the CRD's descriptions);
# the 422 message for a vcJob that breaks its CRD's schema; a `kind: List` file applied with
# default validation; an unknown kind.
#
# Each check prints one transcript line `check<TAB>output` to $FIDELITY_TRANSCRIPT (if set);
# tests/cluster/fidelity.sh runs this script against both servers and fails on any difference.
# Against tephra, the outputs are also compared with kube-apiserver's, written down below.
#
# Environment:
#   FIDELITY_KUBECONFIG  kubeconfig of a real cluster to run against (default: start tephra)
#   TEPHRA_APISERVER     command that starts tephra's API; gets `--listen 127.0.0.1:PORT`
#                        (default: `tephra apiserver` from this checkout, built with cargo)
#   CRDS_DIR             CRD manifests (default: manifests/crds)
#   FIDELITY_TRANSCRIPT  file to write the transcript to
set -euo pipefail
# shellcheck source=tests/kubectl/lib.sh
. "$(dirname "$0")/lib.sh"

CRDS_DIR="${CRDS_DIR:-$ROOT/manifests/crds}"
need_kubectl
WHO="tephra"
[ -z "${FIDELITY_KUBECONFIG:-}" ] || WHO="kube-apiserver"
SUITE="kubectl fidelity ($WHO)"
tephra_work
if [ "$WHO" = tephra ]; then
  TEPHRA_APISERVER="${TEPHRA_APISERVER:-$(built_tephra) apiserver}"
  start_apiserver
else
  K=(kubectl --kubeconfig "$FIDELITY_KUBECONFIG" --request-timeout=20s)
fi

TRANSCRIPT="${FIDELITY_TRANSCRIPT:-$WORK/transcript}"
: >"$TRANSCRIPT"
# record CHECK OUTPUT [WANTED]: writes the transcript line; against tephra, compares with
# kube-apiserver's output when WANTED is given.
record() {
  printf '%s\t%s\n' "$1" "$2" >>"$TRANSCRIPT"
  if [ "$WHO" = tephra ] && [ $# -ge 3 ] && [ "$2" != "$3" ]; then
    fail "$1: got '$2', want '$3'"
  fi
  ok "$1"
}

NS=fidelity
"${K[@]}" create namespace "$NS" >/dev/null
N=(-n "$NS")
"${K[@]}" apply -f "$CRDS_DIR" >/dev/null
"${K[@]}" wait --for condition=established --timeout=20s crd/jobs.batch.volcano.sh >/dev/null
"${K[@]}" "${N[@]}" apply -f - >/dev/null <<'EOF'
apiVersion: v1
kind: ConfigMap
metadata: {name: cm}
data: {a: b}
---
apiVersion: v1
kind: Secret
metadata: {name: sec}
stringData: {pw: x}
---
apiVersion: v1
kind: Service
metadata: {name: svc}
spec:
  # Explicit: tephra does not default a Service's type nor allocate cluster IPs.
  type: ClusterIP
  ports: [{port: 80, protocol: TCP}]
---
apiVersion: v1
kind: Endpoints
metadata: {name: svc}
subsets: [{addresses: [{ip: 10.1.0.1}], ports: [{port: 80}]}]
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: sa}
---
apiVersion: v1
kind: Event
metadata: {name: ev}
involvedObject: {kind: ConfigMap, name: cm, namespace: fidelity}
reason: Testing
message: fidelity
type: Normal
firstTimestamp: "2024-01-01T00:00:00Z"
lastTimestamp: "2024-01-01T00:00:00Z"
count: 1
source: {component: fidelity}
---
apiVersion: v1
kind: Pod
metadata: {name: pod}
spec:
  containers: [{name: c, image: busybox}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: dep}
spec:
  replicas: 0
  selector: {matchLabels: {app: dep}}
  template:
    metadata: {labels: {app: dep}}
    spec: {containers: [{name: c, image: busybox}]}
---
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: rs}
spec:
  replicas: 0
  selector: {matchLabels: {app: rs}}
  template:
    metadata: {labels: {app: rs}}
    spec: {containers: [{name: c, image: busybox}]}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: sts}
spec:
  replicas: 0
  serviceName: svc
  selector: {matchLabels: {app: sts}}
  template:
    metadata: {labels: {app: sts}}
    spec: {containers: [{name: c, image: busybox}]}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: ds}
spec:
  selector: {matchLabels: {app: ds}}
  template:
    metadata: {labels: {app: ds}}
    spec:
      nodeSelector: {no-such-node: "true"}
      containers: [{name: c, image: busybox}]
---
apiVersion: batch/v1
kind: Job
metadata: {name: job}
spec:
  suspend: true
  template:
    spec:
      restartPolicy: Never
      containers: [{name: c, image: busybox}]
---
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {name: lease}
spec: {holderIdentity: me}
EOF
"${K[@]}" apply -f - >/dev/null <<'EOF'
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: fidelity-high}
value: 1000
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: fidelity}
webhooks:
- name: fidelity.example.com
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Ignore
  clientConfig: {url: "https://127.0.0.1:1/validate"}
  rules: [{apiGroups: [example.com], apiVersions: [v1], operations: [CREATE], resources: [widgets]}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: fidelity}
webhooks:
- name: fidelity.example.com
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Ignore
  clientConfig: {url: "https://127.0.0.1:1/mutate"}
  rules: [{apiGroups: [example.com], apiVersions: [v1], operations: [CREATE], resources: [widgets]}]
EOF

# Headers per kind, as kube-apiserver's printers declare them.
check_headers() { # RESOURCE SCOPE NARROW WIDE
  local scope=()
  [ "$2" = ns ] && scope=("${N[@]}")
  record "get $1" "$(header "$1" "${scope[@]}")" "$3"
  record "get $1 -o wide" "$(header "$1" "${scope[@]}" -o wide)" "$4"
}
check_headers pods ns "NAME READY STATUS RESTARTS AGE" "NAME READY STATUS RESTARTS AGE IP NODE NOMINATED NODE READINESS GATES"
check_headers namespaces cluster "NAME STATUS AGE" "NAME STATUS AGE"
check_headers services ns "NAME TYPE CLUSTER-IP EXTERNAL-IP PORT(S) AGE" "NAME TYPE CLUSTER-IP EXTERNAL-IP PORT(S) AGE SELECTOR"
check_headers endpoints ns "NAME ENDPOINTS AGE" "NAME ENDPOINTS AGE"
check_headers configmaps ns "NAME DATA AGE" "NAME DATA AGE"
check_headers secrets ns "NAME TYPE DATA AGE" "NAME TYPE DATA AGE"
check_headers serviceaccounts ns "NAME AGE" "NAME AGE"
check_headers events ns "LAST SEEN TYPE REASON OBJECT MESSAGE" "LAST SEEN TYPE REASON OBJECT SUBOBJECT SOURCE MESSAGE FIRST SEEN COUNT NAME"
check_headers deployments ns "NAME READY UP-TO-DATE AVAILABLE AGE" "NAME READY UP-TO-DATE AVAILABLE AGE CONTAINERS IMAGES SELECTOR"
check_headers replicasets ns "NAME DESIRED CURRENT READY AGE" "NAME DESIRED CURRENT READY AGE CONTAINERS IMAGES SELECTOR"
check_headers statefulsets ns "NAME READY AGE" "NAME READY AGE CONTAINERS IMAGES"
check_headers daemonsets ns "NAME DESIRED CURRENT READY UP-TO-DATE AVAILABLE NODE SELECTOR AGE" "NAME DESIRED CURRENT READY UP-TO-DATE AVAILABLE NODE SELECTOR AGE CONTAINERS IMAGES SELECTOR"
check_headers jobs.batch ns "NAME STATUS COMPLETIONS DURATION AGE" "NAME STATUS COMPLETIONS DURATION AGE CONTAINERS IMAGES SELECTOR"
check_headers leases ns "NAME HOLDER AGE" "NAME HOLDER AGE"
check_headers priorityclasses cluster "NAME VALUE GLOBAL-DEFAULT AGE PREEMPTIONPOLICY" "NAME VALUE GLOBAL-DEFAULT AGE PREEMPTIONPOLICY"
check_headers validatingwebhookconfigurations cluster "NAME WEBHOOKS AGE" "NAME WEBHOOKS AGE"
check_headers mutatingwebhookconfigurations cluster "NAME WEBHOOKS AGE" "NAME WEBHOOKS AGE"
check_headers customresourcedefinitions cluster "NAME SCOPE VERSIONS CREATED AT" "NAME SCOPE VERSIONS CREATED AT GROUP KIND SHORTNAMES ESTABLISHED"
record "get endpoints warning" "$("${K[@]}" "${N[@]}" get endpoints 2>&1 >/dev/null)" "Warning: v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice"
record "get nodes" "$(header nodes)" "NAME STATUS ROLES AGE VERSION"
record "get nodes -o wide" "$(header nodes -o wide)" "NAME STATUS ROLES AGE VERSION INTERNAL-IP EXTERNAL-IP OS-IMAGE KERNEL-VERSION CONTAINER-RUNTIME"
record "get configmap row" "$("${K[@]}" "${N[@]}" get cm cm --no-headers | tr -s ' ' | cut -d' ' -f1-2)" "cm 1"
record "get service row" "$("${K[@]}" "${N[@]}" get svc svc --no-headers | tr -s ' ' | cut -d' ' -f1,2,4,5)" "svc ClusterIP <none> 80/TCP"
record "get endpoints row" "$("${K[@]}" "${N[@]}" get endpoints svc --no-headers | tr -s ' ' | cut -d' ' -f1-2)" "svc 10.1.0.1:80"

# wait_for FILE PATTERN: until a line of FILE matches (at most 10s).
wait_for() {
  local _
  for _ in $(seq 1 100); do
    grep -q "$2" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}
# stop PID: ends a background kubectl started here.
stop() { kill "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }

# kubectl get -w prints the list, then one row per watch event in the list's columns: the
# watch answers Tables too (columns in its first event only).
"${K[@]}" "${N[@]}" apply -f - >/dev/null <<'EOF'
apiVersion: v1
kind: ConfigMap
metadata: {name: watched-1, labels: {watch: fidelity}}
data: {a: b}
EOF
timeout 20 "${K[@]}" "${N[@]}" get configmaps -l watch=fidelity -w >"$WORK/watch.out" 2>&1 &
WATCH=$!
wait_for "$WORK/watch.out" '^watched-1 ' || fail "get -w printed no list: $(cat "$WORK/watch.out")"
"${K[@]}" "${N[@]}" apply -f - >/dev/null <<'EOF'
apiVersion: v1
kind: ConfigMap
metadata: {name: watched-2, labels: {watch: fidelity}}
data: {a: b, c: d}
EOF
wait_for "$WORK/watch.out" '^watched-2 ' || fail "get -w printed no event: $(cat "$WORK/watch.out")"
stop "$WATCH"
OUT="$(tr -s ' ' <"$WORK/watch.out" | cut -d' ' -f1-2 | paste -sd'|' -)"
record "get configmaps -w" "$OUT" "NAME DATA|watched-1 1|watched-2 2"
# --watch-only prints nothing of the list: the header is the first watch event's columns (a
# custom resource's printer columns). kubectl logs the watch request once the list is done.
# A discovery cache of its own, made after the CRDs were established (the one of earlier calls
# knows no vcjobs).
CK=("${K[@]}" --cache-dir "$WORK/discovery-crds")
timeout 20 "${CK[@]}" "${N[@]}" get vcjob --watch-only -v=6 >"$WORK/watch-only.out" 2>"$WORK/watch-only.log" &
WATCH=$!
wait_for "$WORK/watch-only.log" 'watch=true' || fail "get --watch-only did not watch: $(cat "$WORK/watch-only.log")"
"${K[@]}" "${N[@]}" apply -f - >/dev/null <<'EOF'
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: watched}
spec:
  minAvailable: 1
  schedulerName: volcano
  tasks:
  - name: t
    replicas: 1
    template:
      spec:
        containers: [{name: c, image: busybox}]
EOF
wait_for "$WORK/watch-only.out" '^watched ' || fail "get --watch-only printed no event: $(cat "$WORK/watch-only.out")"
stop "$WATCH"
OUT="$(sed -n 1p "$WORK/watch-only.out" | tr -s ' ' | sed 's/ $//')|$(sed -n 2p "$WORK/watch-only.out" | cut -d' ' -f1)"
record "get vcjob --watch-only" "$OUT" "NAME STATUS MINAVAILABLE RUNNINGS AGE|watched"

# --sort-by: kubectl asks for Tables with includeObject=Object and sorts the rows by the
# objects' field (in a PartialObjectMetadata it finds no such field and prints nothing).
"${K[@]}" "${N[@]}" apply -f - >/dev/null <<'EOF'
apiVersion: v1
kind: Pod
metadata: {name: sorted-a, labels: {sort: fidelity}}
spec:
  nodeName: fidelity-node-z
  containers: [{name: c, image: busybox}]
---
apiVersion: v1
kind: Pod
metadata: {name: sorted-b, labels: {sort: fidelity}}
spec:
  nodeName: fidelity-node-y
  containers: [{name: c, image: busybox}]
---
apiVersion: v1
kind: Event
metadata: {name: sorted-1}
involvedObject: {kind: ConfigMap, name: cm, namespace: fidelity}
reason: Sorting
message: later
type: Normal
firstTimestamp: "2024-01-02T00:00:00Z"
lastTimestamp: "2024-01-02T00:00:00Z"
count: 1
source: {component: fidelity}
---
apiVersion: v1
kind: Event
metadata: {name: sorted-2}
involvedObject: {kind: ConfigMap, name: cm, namespace: fidelity}
reason: Sorting
message: earlier
type: Normal
firstTimestamp: "2024-01-01T00:00:00Z"
lastTimestamp: "2024-01-01T00:00:00Z"
count: 1
source: {component: fidelity}
EOF
OUT="$("${K[@]}" "${N[@]}" get pods -l sort=fidelity --sort-by=.spec.nodeName 2>&1 | tr -s ' ' | cut -d' ' -f1 | paste -sd'|' -)"
record "get pods --sort-by=.spec.nodeName" "$OUT" "NAME|sorted-b|sorted-a"
OUT="$("${K[@]}" "${N[@]}" get events --sort-by=.lastTimestamp 2>&1 | tr -s ' ' | sed 's/ $//' | awk 'NR == 1 {print} NR > 1 && $3 == "Sorting" {print $3, $5}' | paste -sd'|' -)"
record "get events --sort-by=.lastTimestamp" "$OUT" "LAST SEEN TYPE REASON OBJECT MESSAGE|Sorting earlier|Sorting later"

# kubectl explain reads the OpenAPI v3 documents (the first lines: kind, version, field).
EXPLAIN="$("${K[@]}" explain pod.spec.containers 2>&1 | sed -n 1,5p | tr -s ' \t' ' ' | sed '/^ *$/d' | paste -sd'|' -)"
record "explain pod.spec.containers" "$EXPLAIN" "KIND: Pod|VERSION: v1|FIELD: containers <[]Container>"
EXPLAIN="$("${K[@]}" explain deployment.spec.replicas 2>&1 | sed -n 1,6p | tr -s ' \t' ' ' | sed '/^ *$/d' | paste -sd'|' -)"
record "explain deployment.spec.replicas" "$EXPLAIN" "GROUP: apps|KIND: Deployment|VERSION: v1|FIELD: replicas <integer>"

# A vcJob that breaks its CRD's schema (replicas: -1, minimum 0): 422 with the field's cause.
cat >"$WORK/bad-job.yaml" <<'EOF'
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: bad, namespace: fidelity}
spec:
  minAvailable: 1
  schedulerName: volcano
  tasks:
  - name: t
    replicas: -1
    template:
      spec:
        containers: [{name: c, image: busybox}]
EOF
OUT="$("${K[@]}" create -f "$WORK/bad-job.yaml" 2>&1)" && fail "an invalid vcJob was accepted: $OUT"
record "create invalid vcJob" "$OUT" 'The Job "bad" is invalid: spec.tasks[0].replicas: Invalid value: -1: spec.tasks[0].replicas in body should be greater than or equal to 0'
OUT="$("${K[@]}" apply -f "$WORK/bad-job.yaml" 2>&1)" && fail "apply accepted an invalid vcJob: $OUT"
record "apply invalid vcJob" "$OUT" 'The Job "bad" is invalid: spec.tasks[0].replicas: Invalid value: -1: spec.tasks[0].replicas in body should be greater than or equal to 0'

# kubectl explain of a custom resource's field: the description its CRD's schema gives.
explain() { "${CK[@]}" explain "$1" 2>&1 | tr -s ' \t' ' ' | sed '/^ *$/d' | paste -sd'|' -; }
record "explain vcjob.spec.minAvailable" "$(explain vcjob.spec.minAvailable)" "GROUP: batch.volcano.sh|KIND: Job|VERSION: v1alpha1|FIELD: minAvailable <integer>|DESCRIPTION:| Gang size: the job starts only when this many pods can run together| (webhook default: the sum of the tasks' \`minAvailable\`)."
record "explain vcjob.spec.tasks.replicas" "$(explain vcjob.spec.tasks.replicas)" "GROUP: batch.volcano.sh|KIND: Job|VERSION: v1alpha1|FIELD: replicas <integer>|DESCRIPTION:| Number of pods of this task."

# A kind: List file with default validation (kubectl validates it against /openapi/v2).
cat >"$WORK/list.yaml" <<'EOF'
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: listed-1, namespace: fidelity}
  data: {a: b}
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: listed-2, namespace: fidelity}
EOF
OUT="$("${K[@]}" apply -f "$WORK/list.yaml" 2>&1 | paste -sd'|' -)" || fail "apply of a List: $OUT"
record "apply kind: List" "$OUT" "configmap/listed-1 created|configmap/listed-2 created"
sed 's/  data: {a: b}/  dta: {a: b}/' "$WORK/list.yaml" | sed 's/listed-1/listed-3/' >"$WORK/bad-list.yaml"
OUT="$("${K[@]}" apply -f "$WORK/bad-list.yaml" 2>&1 | sed "s|$WORK/||")" && fail "a List with an unknown field was applied: $OUT"
record "apply kind: List with an unknown field" "$OUT" 'error: error validating "bad-list.yaml": error validating data: ValidationError(ConfigMap): unknown field "dta" in io.k8s.api.core.v1.ConfigMap; if you choose to ignore these errors, turn validation off with --validate=false'

# An unknown kind: answered as a cluster answers it.
printf 'apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n' >"$WORK/widget.yaml"
OUT="$("${K[@]}" apply -f "$WORK/widget.yaml" 2>&1 | sed "s|$WORK/||" | paste -sd'|' -)" && fail "an unknown kind was applied: $OUT"
record "apply unknown kind" "$OUT" 'error: resource mapping not found for name: "w" namespace: "" from "widget.yaml": no matches for kind "Widget" in version "example.com/v1"|ensure CRDs are installed first'

"${K[@]}" delete -f "$CRDS_DIR" --wait=false >/dev/null 2>&1 || true
"${K[@]}" delete priorityclass fidelity-high --wait=false >/dev/null 2>&1 || true
"${K[@]}" delete validatingwebhookconfiguration,mutatingwebhookconfiguration fidelity --wait=false >/dev/null 2>&1 || true
"${K[@]}" delete namespace "$NS" --wait=false >/dev/null 2>&1 || true
echo "kubectl fidelity ($WHO): $PASSED passed, 0 failed"
