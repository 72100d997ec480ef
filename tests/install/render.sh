#!/usr/bin/env bash
# The install files rendered by the real tools and checked against an API server:
#  - tests/install/sync.sh --check (the chart's CRDs, rules and dashboard are the manifests')
#  - `kubectl kustomize` of the base (manifests/) and of each overlay (overlays/*)
#  - `helm lint --strict` and `helm template` of charts/tephra with several value sets, and
#    values the schema must refuse
#  - every rendered object sent to `tephra apiserver` with `kubectl apply --dry-run=server`
#    (strict field validation: an unknown or misplaced field is refused), plus a
#    `helm install --dry-run` there (renders NOTES.txt)
#  - checks of what the renders must contain (TLS flags, cert-manager annotations, caBundle)
#  - the `tephra serve` args of each rendered Deployment: every flag listed by this tephra's
#    `serve --help` and every value accepted by it (an unknown one makes tephra exit at start)
#  - when the real control plane is built (tests/cluster/build.sh), the same renders sent to
#    a real kube-apiserver too (tests/cluster/up.sh), which also checks every value's type
#
# Why the server and not `kubectl apply --dry-run=client`: a client dry run needs discovery
# anyway and checks nothing but the YAML; the server decodes every built-in object into its
# Kubernetes type and refuses unknown fields, and checks custom resources against their CRD.
# Kinds of other projects (cert-manager's Certificate and Issuer, prometheus-operator's
# ServiceMonitor and PrometheusRule) are known to it through tests/install/crds/, minimal
# stand-in CRDs applied first (see that file for what they check).
#
# Environment:
#   TEPHRA_BIN  the tephra binary (default: built with cargo from this checkout)
#   HELM        helm binary (default: tests/install/build-tools.sh builds or finds it)
#   TEPHRA_RENDER_REAL_API=0  skip the real kube-apiserver even when it is built
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
command -v kubectl >/dev/null || { echo "render.sh: kubectl not installed" >&2; exit 1; }
if [ -z "${TEPHRA_BIN:-}" ]; then
  (cd "$ROOT" && cargo build -q --bin tephra)
  TEPHRA_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/debug/tephra"
fi
HELM="${HELM:-$("$ROOT/tests/install/build-tools.sh" | tail -n 1)}"

PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
WORK="$(mktemp -d)"
"$TEPHRA_BIN" apiserver --listen "127.0.0.1:$PORT" >"$WORK/apiserver.log" 2>&1 &
SERVER=$!
CLUSTER=""
cleanup() {
  kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true
  [ -z "$CLUSTER" ] || "$ROOT/tests/cluster/down.sh" "$CLUSTER" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

K=(kubectl --server "http://127.0.0.1:$PORT" --kubeconfig /dev/null --request-timeout=20s)
PASSED=0
ok() { PASSED=$((PASSED + 1)); echo "ok - $*"; }
fail() { echo "render.sh: $PASSED passed, 1 failed" >&2; echo "FAIL: $*" >&2; exit 1; }
# contains FILE PATTERN WHAT / lacks FILE PATTERN WHAT: a fixed-string check of a render.
contains() { grep -qF -- "$2" "$1" || fail "$3: '$2' not in the render"; ok "$3"; }
lacks() { if grep -qF -- "$2" "$1"; then fail "$3: '$2' in the render"; fi; ok "$3"; }
# limited_to FILE NAME WHAT: a rule of FILE names NAME in its resourceNames (kustomize writes
# the list as a block, the chart's templates inline).
limited_to() {
  grep -A1 'resourceNames:' "$1" | grep -qE -- "(^ *- |\[\")$2(\"|$)" || fail "$3: no rule with resourceNames $2"
  ok "$3"
}
# serve_args FILE: the args of the container `tephra` of the Deployment `tephra` in the render
# FILE, one a line, quotes and comments dropped.
serve_args() {
  awk '
    /^---/ { deploy = 0; inargs = 0 }
    /^kind: Deployment$/ { kind = 1 }
    /^---/ { kind = 0 }
    kind && /^  name: tephra$/ { deploy = 1 }
    deploy && /^ *(- )?args:$/ { inargs = 1; indent = index($0, "args:"); next }
    inargs {
      if ($0 ~ /^ *#/) next
      # kustomize writes the items at the indentation of `args:`, helm deeper.
      if (match($0, /[^ ]/) < indent || $0 !~ /^ *- /) { inargs = 0; next }
      sub(/^ *- */, ""); gsub(/"/, ""); print
    }
  ' "$1"
}
# flags_known NAME FILE: the rendered Deployment runs `tephra serve` with flags that this
# tephra's `serve --help` lists (an unknown flag makes tephra exit at start).
flags_known() {
  local name=$1 file=$2 args flag argv n=0
  args=$(serve_args "$file")
  [ "$(head -n 1 <<<"$args")" = serve ] || fail "$name: the tephra container does not run 'serve' (args: $args)"
  while read -r flag; do
    case $flag in --*) ;; *) continue ;; esac
    flag=${flag%%=*}
    grep -qE -- "(^|[ ,])$flag([ ,=]|\$)" "$WORK/serve-help" || fail "$name: flag $flag is not in 'tephra serve --help'"
    n=$((n + 1))
  done < <(tail -n +2 <<<"$args")
  [ "$n" -gt 0 ] || fail "$name: no flags found in the tephra container's args"
  # Their values too: clap checks each value as it parses it, before the trailing --help
  # (which keeps tephra from starting); `--tls-mode=self` fails here, not above.
  mapfile -t argv <<<"$args"
  "$TEPHRA_BIN" "${argv[@]}" --help >/dev/null 2>"$WORK/err" || fail "$name: tephra refuses the args: $(cat "$WORK/err")"
  ok "$name: all $n flags of 'tephra serve' are known to tephra, and their values accepted"
}
"$TEPHRA_BIN" serve --help >"$WORK/serve-help" || fail "tephra serve --help failed"

"$ROOT/tests/install/sync.sh" --check || fail "the chart's copies differ from manifests/ (run tests/install/sync.sh)"
ok "chart CRDs, rules and dashboard equal manifests/"

for _ in $(seq 1 300); do
  "${K[@]}" get --raw /version >/dev/null 2>&1 && break
  kill -0 "$SERVER" 2>/dev/null || fail "tephra apiserver exited: $(tail -n 5 "$WORK/apiserver.log")"
  sleep 0.1
done
"${K[@]}" get --raw /version >/dev/null 2>&1 || fail "tephra apiserver not ready in 30s"
# Objects a user has before installing: the namespaces (a dry run of a Namespace creates
# nothing, so the namespaced objects after it need it to exist) and the CRDs of the other
# projects the overlays use.
for ns in tephra-system tephra-helm; do "${K[@]}" create namespace "$ns" >/dev/null || fail "create namespace $ns"; done
"${K[@]}" apply -f "$ROOT/manifests/crds" >/dev/null || fail "apply tephra's CRDs"
"${K[@]}" apply -f "$ROOT/tests/install/crds/foreign-crds.yaml" >/dev/null || fail "apply the stand-in CRDs"
for _ in $(seq 1 50); do "${K[@]}" get servicemonitors -A >/dev/null 2>&1 && break; sleep 0.1; done
ok "tephra apiserver on port $PORT with tephra's and the stand-in CRDs"

# dry_run NAME FILE [kubectl...]: every object of FILE accepted by the server (tephra
# apiserver unless another kubectl command line is given); counts them.
dry_run() {
  local name=$1 file=$2 out n
  shift 2
  local kc=("${K[@]}")
  [ "$#" -eq 0 ] || kc=("$@")
  n=$(grep -c '^kind:' "$file")
  out=$("${kc[@]}" apply --dry-run=server --validate=strict -f "$file" 2>&1) || fail "$name: dry run refused: $out"
  [ "$(grep -c 'server dry run' <<<"$out")" -eq "$n" ] || fail "$name: $n objects rendered, the server answered: $out"
  ok "$name: $n objects accepted by the server (dry run)"
}

# --- kustomize --------------------------------------------------------------------------
for dir in manifests overlays/files overlays/cert-manager overlays/monitoring; do
  name=${dir//\//-}
  kubectl kustomize "$ROOT/$dir" >"$WORK/$name.yaml" 2>"$WORK/err" || fail "kubectl kustomize $dir: $(cat "$WORK/err")"
  dry_run "kustomize $dir" "$WORK/$name.yaml"
done
B="$WORK/manifests.yaml" F="$WORK/overlays-files.yaml" C="$WORK/overlays-cert-manager.yaml" M="$WORK/overlays-monitoring.yaml"
contains "$B" "kind: CustomResourceDefinition" "base: the CRDs"
contains "$B" "name: tephra-scheduler-config-" "base: scheduler configuration as a generated ConfigMap"
# The base manages its certificates (--tls-mode self): no Secret mounted anywhere (the CA key
# in it must never reach kube-scheduler), kube-scheduler trusts the ConfigMap tephra writes,
# and the permissions are limited to tephra's own Secret, ConfigMap and webhook configurations.
contains "$B" "- --tls-mode=self" "base: self-managed certificates"
flags_known "base" "$B"
lacks "$B" "secretName: tephra-tls" "base: the Secret tephra-tls is mounted nowhere"
contains "$B" "name: tephra-ca" "base: kube-scheduler trusts the ConfigMap tephra-ca"
limited_to "$B" tephra-tls "base: Secret permissions limited to tephra-tls"
limited_to "$B" tephra-ca "base: ConfigMap permissions limited to tephra-ca"
limited_to "$B" tephra-mutating-webhooks "base: webhook permissions limited to tephra's configurations"
limited_to "$B" tephra-validating-webhooks "base: (both of them)"
contains "$F" "- --tls-mode=files" "files: tephra reads certificate files"
flags_known "files" "$F"
[ "$(grep -c 'secretName: tephra-tls' "$F")" -eq 2 ] || fail "files: tephra and its kube-scheduler both mount the Secret tephra-tls"
ok "files: tephra serves, and kube-scheduler trusts, the Secret tephra-tls"
lacks "$F" "name: tephra-webhook-ca" "files: no permissions for self-managed certificates"
lacks "$F" "name: tephra-ca" "files: kube-scheduler does not read the ConfigMap tephra-ca, nobody writes it"
contains "$C" "- --tls-mode=files" "cert-manager: tephra reads certificate files"
flags_known "cert-manager" "$C"
flags_known "monitoring" "$M"
[ "$(grep -c 'cert-manager.io/inject-ca-from: tephra-system/tephra-serving' "$C")" -eq 2 ] || fail "cert-manager: both webhook configurations get the CA injector annotation"
ok "cert-manager: CA injected into both webhook configurations"
contains "$C" "kind: Certificate" "cert-manager: the serving Certificate"
contains "$M" "kind: ServiceMonitor" "monitoring: ServiceMonitor"
contains "$M" "kind: PrometheusRule" "monitoring: PrometheusRule"
contains "$M" "grafana_dashboard: \"1\"" "monitoring: dashboard ConfigMap for Grafana's sidecar"
lacks "$B" "kind: ServiceMonitor" "base: no monitoring objects"

# A misspelt field must be refused: the dry run is a real check, not a formality.
sed 's/^  endpoints:/  endpointz:/' "$M" >"$WORK/typo.yaml"
! cmp -s "$M" "$WORK/typo.yaml" || fail "no ServiceMonitor endpoints field to misspell"
if "${K[@]}" apply --dry-run=server --validate=strict -f "$WORK/typo.yaml" >/dev/null 2>&1; then
  fail "a ServiceMonitor with a misspelt field was accepted"
fi
sed 's/^  replicas: \([0-9]*\)$/  replicaz: \1/' "$B" >"$WORK/typo.yaml"
! cmp -s "$B" "$WORK/typo.yaml" || fail "no Deployment replicas field to misspell"
if "${K[@]}" apply --dry-run=server --validate=strict -f "$WORK/typo.yaml" >/dev/null 2>&1; then
  fail "a Deployment with a misspelt field was accepted"
fi
ok "misspelt fields are refused (ServiceMonitor, Deployment)"

# --- Helm -------------------------------------------------------------------------------
CHART="$ROOT/charts/tephra"
CA=$(printf -- '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n' | base64 -w0)
# Value sets: the defaults; cert-manager with everything for monitoring; your own files with
# the extender in another kube-scheduler; and choices for every other value.
sets=(
  "defaults|"
  "cert-manager|--set tls.mode=certManager"
  "cert-manager+monitoring|--set tls.mode=certManager --set monitoring.serviceMonitor.enabled=true --set monitoring.prometheusRule.enabled=true --set monitoring.dashboard.enabled=true"
  "files|--set tls.mode=files --set tls.caBundle=$CA --set kubeScheduler.enabled=false --set replicas=1"
  "choices|-f $WORK/choices.yaml"
)
cat >"$WORK/choices.yaml" <<'VALUES'
schedulerNames: [volcano, batch]
webhooks:
  failurePolicy: {pods: Fail}
  excludeNamespaces: [kube-system, monitoring]
nodeSelector: {role: infra}
tolerations: [{key: infra, operator: Exists}]
extraArgs: [--schedule-period=2s]
schedulerConf: |
  actions: "enqueue, allocate, backfill"
controllerConf: |
  networkTopologyDiscovery:
  - source: label
    enabled: true
    config:
      networkTopologyTypes:
        fabric: [{nodeLabel: example.com/rack}, {nodeLabel: kubernetes.io/hostname}]
VALUES
for entry in "${sets[@]}"; do
  name=${entry%%|*} args=${entry#*|}
  # shellcheck disable=SC2086 # the value flags are split on purpose
  "$HELM" lint --strict "$CHART" -n tephra-helm $args >"$WORK/lint" 2>&1 || fail "helm lint ($name): $(cat "$WORK/lint")"
  # shellcheck disable=SC2086
  "$HELM" template tephra "$CHART" -n tephra-helm --include-crds $args >"$WORK/helm-$name.yaml" 2>"$WORK/err" || fail "helm template ($name): $(cat "$WORK/err")"
  ok "helm lint and template ($name)"
  dry_run "helm $name" "$WORK/helm-$name.yaml"
done
H="$WORK/helm-defaults.yaml"
contains "$H" "- --tls-mode=self" "helm defaults: self-managed certificates"
contains "$H" "- --tls-self-ca-overlap=720h" "helm defaults: the self-managed lifetimes from values"
lacks "$H" "cert-manager.io" "helm defaults: no cert-manager objects or annotations"
lacks "$H" "secretName: tephra-tls" "helm defaults: the Secret tephra-tls is mounted nowhere"
contains "$H" "name: tephra-ca" "helm defaults: kube-scheduler trusts the ConfigMap tephra-ca"
limited_to "$H" tephra-tls "helm defaults: Secret permissions limited to tephra-tls"
limited_to "$H" tephra-validating-webhooks "helm defaults: webhook permissions limited to tephra's configurations"
flags_known "helm defaults" "$H"
H="$WORK/helm-cert-manager.yaml"
contains "$H" "- --tls-mode=files" "helm cert-manager: tephra reads certificate files"
[ "$(grep -c 'cert-manager.io/inject-ca-from: tephra-helm/tephra-serving' "$H")" -eq 2 ] || fail "helm cert-manager: cert-manager injects the CA"
ok "helm cert-manager: cert-manager issues the certificate"
contains "$H" "secret: {secretName: tephra-tls}" "helm cert-manager: tephra mounts the Secret tephra-tls"
if grep -A1 'configMap:' "$H" | grep -qF 'name: tephra-ca'; then fail "helm cert-manager: kube-scheduler mounts the ConfigMap tephra-ca"; fi
ok "helm cert-manager: kube-scheduler trusts the Secret, not the ConfigMap tephra-ca"
lacks "$H" "tephra-webhook-ca" "helm cert-manager: no permissions for self-managed certificates"
flags_known "helm cert-manager" "$H"
contains "$H" "kind: PodDisruptionBudget" "helm defaults: a PodDisruptionBudget for 2 replicas"
contains "$H" "urlPrefix: https://tephra-extender.tephra-helm.svc:443/scheduler" "helm defaults: kube-scheduler calls the leader's extender Service"
contains "$H" 'values: ["tephra-helm","kube-system"]' "helm defaults: the release namespace is not sent to the webhooks"
lacks "$H" "kind: ServiceMonitor" "helm defaults: monitoring off"
H="$WORK/helm-cert-manager+monitoring.yaml"
[ "$(grep -c 'cert-manager.io/inject-ca-from: tephra-helm/tephra-serving' "$H")" -eq 2 ] || fail "helm cert-manager: CA injector annotation on both configurations"
ok "helm cert-manager: CA injected into both webhook configurations"
contains "$H" "kind: PrometheusRule" "helm monitoring: PrometheusRule"
contains "$H" "alert: TephraGangWaitingTooLong" "helm monitoring: the alerts of manifests/monitoring"
H="$WORK/helm-files.yaml"
contains "$H" "caBundle: $CA" "helm files: the given caBundle in the webhooks"
lacks "$H" "kind: Certificate" "helm files: no cert-manager objects"
flags_known "helm files" "$H"
lacks "$H" "kind: PodDisruptionBudget" "helm files: no PodDisruptionBudget for one replica"
lacks "$H" "tephra-kube-scheduler" "helm files: no kube-scheduler when disabled"
H="$WORK/helm-choices.yaml"
contains "$H" "- schedulerName: batch" "helm choices: one kube-scheduler profile per scheduler name"
contains "$H" "- --scheduler-name=batch" "helm choices: tephra serves every scheduler name"
contains "$H" 'expression: object.spec.schedulerName in ["volcano","batch"]' "helm choices: the pod mutation is sent the pods of every scheduler name"
# The defaults' fail-closed webhooks, and the two pods webhooks made so by the values.
fail_closed=$(($(grep -c 'failurePolicy: Fail' "$WORK/helm-defaults.yaml") + 2))
[ "$(grep -c 'failurePolicy: Fail' "$H")" -eq "$fail_closed" ] || fail "helm choices: pods webhooks Fail ($fail_closed fail-closed webhooks)"
ok "helm choices: failure policies from values"
contains "$H" "role: infra" "helm choices: nodeSelector"
contains "$H" "- --config=/etc/tephra/scheduler/scheduler-conf.yaml" "helm choices: scheduler configuration file"
contains "$H" "- --controller-config=/etc/tephra/controller/volcano-controller.conf" "helm choices: controller configuration file"
contains "$H" "configMap: {name: tephra-controller-conf}" "helm choices: the controller configuration mounted from its ConfigMap"
flags_known "helm choices" "$H"

# Values the schema refuses, each with helm's message.
bad=(
  "--set tls.mode=auto|value must be one of 'self', 'certManager', 'files'"
  "--set tls.self.caOverlap=30d|at '/tls/self/caOverlap': '30d' does not match pattern"
  "--set replicas=0|minimum: got 0, want 1"
  "--set webhooks.failurePolicy.jobs=Never|value must be one of 'Fail', 'Ignore'"
  "--set schedulerNames=null|missing property 'schedulerNames'"
  "--set schedulerNames[0]=Bad_Name|at '/schedulerNames/0': 'Bad_Name' does not match pattern"
  "--set extraArgs={schedule-period=2s}|does not match pattern"
  "--set tls.mode=files|tls.mode=files needs tls.caBundle"
  "--set imageTag=x|additional properties 'imageTag' not allowed"
)
for entry in "${bad[@]}"; do
  args=${entry%%|*} want=${entry#*|}
  # shellcheck disable=SC2086
  if "$HELM" template tephra "$CHART" $args >"$WORK/out" 2>&1; then fail "helm accepted $args"; fi
  grep -qF -- "$want" "$WORK/out" || fail "helm refused $args, but not with '$want': $(cat "$WORK/out")"
done
ok "helm refuses ${#bad[@]} bad value sets with a clear message"

# helm install --dry-run against the API: what a user runs first, and NOTES.txt rendered.
printf 'apiVersion: v1\nkind: Config\nclusters: [{name: t, cluster: {server: "http://127.0.0.1:%s"}}]\ncontexts: [{name: t, context: {cluster: t, user: t}}]\nusers: [{name: t, user: {}}]\ncurrent-context: t\n' "$PORT" >"$WORK/kubeconfig"
"$HELM" install tephra "$CHART" -n tephra-helm --kubeconfig "$WORK/kubeconfig" --dry-run=server >"$WORK/install" 2>&1 \
  || fail "helm install --dry-run=server: $(tail -n 20 "$WORK/install")"
contains "$WORK/install" "kubectl -n tephra-helm rollout status deployment/tephra" "helm NOTES: how to wait for tephra"
contains "$WORK/install" "kubectl get vcjob hello-gang -w" "helm NOTES: a first vcJob"
contains "$WORK/install" "tephra's own kube-scheduler (Deployment tephra-kube-scheduler)" "helm NOTES: how kube-scheduler reaches tephra"

# The README's Helm lifecycle for real: install, upgrade with new values, uninstall
# (everything but the CRDs goes, as Helm does; they were applied above, so Helm skips its
# crds/ here).
HK=("$HELM" -n tephra-helm --kubeconfig "$WORK/kubeconfig")
"${HK[@]}" install tephra "$CHART" >"$WORK/install" 2>&1 || fail "helm install: $(tail -n 20 "$WORK/install")"
[ "$("${K[@]}" -n tephra-helm get deployment tephra -o jsonpath='{.spec.replicas}')" = 2 ] || fail "helm install: no Deployment tephra with 2 replicas"
"${K[@]}" get validatingwebhookconfiguration tephra-validating-webhooks >/dev/null 2>&1 || fail "helm install: no webhook configuration"
ok "helm install: Deployment tephra (2 replicas), webhook configurations"
"${HK[@]}" upgrade tephra "$CHART" --set replicas=3 --set monitoring.dashboard.enabled=true >"$WORK/upgrade" 2>&1 \
  || fail "helm upgrade: $(tail -n 20 "$WORK/upgrade")"
[ "$("${K[@]}" -n tephra-helm get deployment tephra -o jsonpath='{.spec.replicas}')" = 3 ] || fail "helm upgrade: replicas not 3"
"${K[@]}" -n tephra-helm get configmap tephra-grafana-dashboard >/dev/null 2>&1 || fail "helm upgrade: no dashboard ConfigMap"
ok "helm upgrade: 3 replicas and the dashboard"
"${HK[@]}" uninstall tephra >"$WORK/uninstall" 2>&1 || fail "helm uninstall: $(cat "$WORK/uninstall")"
for obj in clusterrole/tephra mutatingwebhookconfiguration/tephra-mutating-webhooks "-n tephra-helm deployment/tephra"; do
  # shellcheck disable=SC2086 # "-n NS" is two words on purpose
  if "${K[@]}" get $obj >/dev/null 2>&1; then fail "helm uninstall left $obj"; fi
done
"${K[@]}" get crd jobs.batch.volcano.sh >/dev/null 2>&1 || fail "helm uninstall deleted the CRDs (Helm keeps them)"
ok "helm uninstall: tephra's objects gone, the CRDs kept"

# --- the same renders against a real kube-apiserver ------------------------------------
# tephra apiserver decodes built-in kinds and refuses unknown fields but does not check
# every value (types of custom resources, enums, required fields of built-in kinds);
# kube-apiserver does. Only when tests/cluster/build.sh has built it (CI does, first).
# shellcheck source=tests/cluster/lib.sh
. "$ROOT/tests/cluster/lib.sh"
if [ "${TEPHRA_RENDER_REAL_API:-1}" = 0 ]; then
  echo "skipped: real kube-apiserver (TEPHRA_RENDER_REAL_API=0)"
elif [ ! -x "$bin_dir/kube-apiserver" ]; then
  echo "skipped: real kube-apiserver (not built; tests/cluster/build.sh builds it)"
else
  CLUSTER=$(TEPHRA_CLUSTER_DIR="$WORK/cluster" "$ROOT/tests/cluster/up.sh" 1 2>"$WORK/up.err" | tail -n 1) \
    || fail "tests/cluster/up.sh: $(tail -n 5 "$WORK/up.err")"
  R=(kubectl --kubeconfig "$CLUSTER/kubeconfig" --request-timeout=30s)
  for ns in tephra-system tephra-helm; do "${R[@]}" create namespace "$ns" >/dev/null || fail "kube-apiserver: create namespace $ns"; done
  "${R[@]}" apply --server-side -f "$ROOT/manifests/crds" -f "$ROOT/tests/install/crds/foreign-crds.yaml" >/dev/null \
    || fail "kube-apiserver: apply the CRDs"
  # kubectl wait gives up at once ("accessor error: <nil>") on a CRD whose status has no
  # conditions yet, right after the apply; retry a few times (bounded) before calling it a failure.
  established=0
  for _ in 1 2 3 4 5; do
    if "${R[@]}" wait --for=condition=Established crd --all --timeout=30s >/dev/null 2>&1; then
      established=1
      break
    fi
    sleep 1
  done
  [ "$established" = 1 ] || fail "kube-apiserver: CRDs not established"
  ok "a real kube-apiserver ($k8s_version) with tephra's and the stand-in CRDs"
  for f in "$WORK"/manifests.yaml "$WORK"/overlays-*.yaml "$WORK"/helm-*.yaml; do
    dry_run "kube-apiserver: $(basename "$f" .yaml)" "$f" "${R[@]}"
  done
  # The README's kustomize install for real (kwok plays the nodes, so pods "run" without the
  # images): applied, and both Deployments roll out.
  "${R[@]}" apply -k "$ROOT/overlays/monitoring" >"$WORK/apply" 2>&1 || fail "kubectl apply -k overlays/monitoring: $(cat "$WORK/apply")"
  "${R[@]}" -n tephra-system rollout status deployment/tephra deployment/tephra-kube-scheduler --timeout=60s >/dev/null \
    || fail "kube-apiserver: tephra's Deployments did not roll out: $("${R[@]}" -n tephra-system get pods 2>&1)"
  cm=$("${R[@]}" -n tephra-system get deployment tephra-kube-scheduler -o jsonpath='{.spec.template.spec.volumes[?(@.name=="config")].configMap.name}')
  "${R[@]}" -n tephra-system get configmap "$cm" >/dev/null 2>&1 || fail "kube-scheduler's ConfigMap '$cm' does not exist"
  ok "kube-apiserver: kubectl apply -k overlays/monitoring, both Deployments rolled out, scheduler ConfigMap $cm"
fi

echo "render.sh: $PASSED passed"
