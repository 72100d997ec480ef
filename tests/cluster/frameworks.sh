# shellcheck shell=bash
# The batch frameworks' own operators against tephra on the real control plane: KubeRay's
# ray-operator, Kubeflow's training operator (PyTorchJob), MPI Operator (MPIJob v2beta1) and
# Spark Operator (SparkApplication), each built by tests/frameworks/build.sh and run out of
# cluster with its Volcano integration switched on as its documentation says; tephra is their
# Volcano. Sourced by run.sh, never run; the scenarios are the s_fw_* functions.
#
# kwok ends a pod Succeeded when it carries kwok.tephra.test/succeed-after (the stories put it
# on the pod templates that end: PyTorch's replicas, MPI's launcher, Spark's driver, Ray's
# submitter); Ray's head and workers and MPI's workers run until deleted, as they do for real.
# shellcheck disable=SC2154 # work, repo_dir, why: given by run.sh

declare -A op_pids=()
fw_dir() { "$repo_dir/tests/frameworks/build.sh" "$1" | awk -v n="$1" '$1 == n { print $2 }'; }
# start_operator NAME LAUNCH: builds NAME (only when missing), installs its CRDs, then runs
# `LAUNCH DIR` (DIR: the operator's folder) in the background, logging to
# $work/NAME-operator.log; LAUNCH execs the operator. Once per run.
start_operator() {
  local name=$1 launch=$2 dir
  [ -z "${op_pids[$name]:-}" ] || return 0
  dir=$(fw_dir "$name") && [ -n "$dir" ] || { why="tests/frameworks/build.sh $name failed"; return 1; }
  # Server-side: the CRDs are larger than the annotation a client-side apply keeps.
  k apply --server-side -f "$dir/crds/" >/dev/null || { why="apply $name's CRDs"; return 1; }
  # Large CRDs can take over a minute to be established on a loaded 2-core machine.
  crds_established 180 "$dir/crds/" || { why="$name's CRDs not established after 180 s"; return 1; }
  ("$launch" "$dir") >"$work/$name-operator.log" 2>&1 &
  op_pids[$name]=$!
  echo "#   $name operator $(basename "$dir") started (log $work/$name-operator.log)"
}
stop_operators() {
  local name
  for name in "${!op_pids[@]}"; do
    kill "${op_pids[$name]}" 2>/dev/null || true
    wait "${op_pids[$name]}" 2>/dev/null || true
  done
  op_pids=()
  if [ -n "${jobs_api_pid:-}" ]; then kill "$jobs_api_pid" 2>/dev/null || true; fi
  jobs_api_pid=""
}
# pg_spec NAME: a PodGroup's minMember, queue, priority class and minResources' cpu.
pg_spec() {
  k get podgroups.scheduling.volcano.sh "$1" \
    -o jsonpath='{.spec.minMember} {.spec.queue} {.spec.priorityClassName} {.spec.minResources.cpu}' 2>/dev/null
}
# bound_by LABEL_SELECTOR: how many of those pods are bound to a node.
bound_by() {
  k get pods -l "$1" -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | grep -c . || true
}
bound_is() { [ "$(bound_by "$1")" = "$2" ]; }
# The priority class the stories give their apps, as each operator lets one be named.
fw_priority_class() {
  printf 'apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: fw-high}\nvalue: 1000\n' \
    | k apply -f - >/dev/null || { why="apply PriorityClass fw-high"; return 1; }
}
# condition_true KIND NAME TYPE: the object's status condition TYPE is True.
condition_true() {
  [ "$(k get "$1" "$2" -o jsonpath="{.status.conditions[?(@.type==\"$3\")].status}")" = True ]
}
# app_story KIND NAME PODS PODGROUP WANT DONE: applies the app read from stdin (its pods
# labelled fw-test=NAME), waits until its PODS pods are bound, reads its PodGroup while they
# run (some operators delete it once the app is done), waits until `DONE NAME` holds, and
# checks that the PodGroup is as the operator made it: WANT is its pg_spec. Then deletes the
# app (KIND NAME) and its pods, so the next story starts from nothing.
app_story() {
  local kind=$1 name=$2 pods=$3 group=$4 want=$5 done=$6 pg
  k apply -f - >/dev/null || { why="apply $name"; return 1; }
  wait_until 120 bound_is "fw-test=$name" "$pods" \
    || { why="$name: $(bound_by "fw-test=$name") of $pods pods bound after 120 s (PodGroup $group '$(k get podgroups.scheduling.volcano.sh "$group" -o jsonpath='{.status.phase}' 2>&1)')"; return 1; }
  pg=$(pg_spec "$group")
  wait_until 90 "$done" "$name" || { why="$name not done 90 s after its pods were bound"; return 1; }
  [ "$pg" = "$want" ] || { why="the operator's PodGroup $group: '$pg', want '$want'"; return 1; }
  echo "#   $name done; its PodGroup $group used as made (minMember, queue, priority class, cpu): $pg"
  app_gone "$kind" "$name" "fw-test=$name"
}
# app_gone KIND NAME SELECTOR: deletes the app and the pods SELECTOR picks (a Spark driver's
# owner comes from the operator's webhook, not run here) and waits until the pods are gone.
app_gone() {
  k delete "$1" "$2" --wait=false >/dev/null 2>&1
  k delete pods -l "$3" --wait=false >/dev/null 2>&1
  wait_until 60 no_pods "$3" || { why="$1 $2's pods still there 60 s after its deletion"; return 1; }
}
no_pods() { [ -z "$(k get pods -l "$1" -o name)" ]; }
# Cores requested by the bound pods matching LABEL_SELECTOR.
bound_cpu() {
  k get pods -l "$1" \
    -o jsonpath='{range .items[?(@.spec.nodeName)]}{range .spec.containers[*]}{.resources.requests.cpu}{"\n"}{end}{end}' \
    | awk '{ v = $1; if (v ~ /m$/) { sub(/m$/, "", v); v /= 1000 } s += v } END { print s + 0 }'
}

# --- KubeRay ------------------------------------------------------------------------------
# `--batch-scheduler=volcano`, as KubeRay's documentation says. RayJobs are followed through
# the Ray jobs API of their cluster's head: tests/frameworks/ray/jobs_api.py answers it as a
# head whose job has run (kwok pods run no Ray), as the operator's HTTP proxy.
jobs_api_pid=""
launch_ray() {
  HTTP_PROXY="http://127.0.0.1:$(cat "$work/jobs-api.port")" NO_PROXY=127.0.0.1,localhost \
    exec "$1/operator" --batch-scheduler=volcano --enable-leader-election=false \
    --metrics-addr=0 --health-probe-bind-address=0 --kubeconfig "$KUBECONFIG"
}
start_ray_operator() {
  if [ -z "$jobs_api_pid" ]; then
    rm -f "$work/jobs-api.port"
    python3 "$repo_dir/tests/frameworks/ray/jobs_api.py" "$work/jobs-api.port" 2>"$work/jobs-api.log" &
    jobs_api_pid=$!
    wait_until 10 test -s "$work/jobs-api.port" || { why="the Ray jobs API stand-in did not start"; return 1; }
  fi
  start_operator ray launch_ray
}
# ray_spec WORKERS WORKER_CPU: a RayCluster's spec (indented for `spec:`), a head of 1 cpu
# and WORKERS workers of WORKER_CPU.
ray_spec() {
  cat <<YAML
  rayVersion: "2.46.0"
  headGroupSpec:
    rayStartParams: {}
    template:
      spec:
        containers:
          - name: ray-head
            image: rayproject/ray:2.46.0
            resources: {requests: {cpu: "1", memory: 1Gi}, limits: {cpu: "1", memory: 1Gi}}
  workerGroupSpecs:
    - groupName: workers
      replicas: $1
      minReplicas: $1
      maxReplicas: $1
      rayStartParams: {}
      template:
        spec:
          containers:
            - name: ray-worker
              image: rayproject/ray:2.46.0
              resources: {requests: {cpu: "$2", memory: 1Gi}, limits: {cpu: "$2", memory: 1Gi}}
YAML
}
# raycluster NAME WORKERS WORKER_CPU [QUEUE]: in QUEUE (default) by KubeRay's label.
raycluster() {
  printf 'apiVersion: ray.io/v1\nkind: RayCluster\nmetadata:\n  name: %s\n  labels: {volcano.sh/queue-name: %s}\nspec:\n' "$1" "${4:-default}"
  ray_spec "$2" "$3"
}
ray_state_is() { [ "$(k get raycluster "$1" -o jsonpath='{.status.state}')" = "$2" ]; }
ray_pods() { k get pods -l "ray.io/cluster=$1" -o name | wc -l | tr -d ' '; }
ray_bound() { k get pods -l "ray.io/cluster=$1" -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | grep -c . || true; }
ray_pods_are() { [ "$(ray_pods "$1")" = "$2" ]; }
ray_gone() { ray_pods_are "$1" 0; }
s_ray_cluster() {
  start_ray_operator || return 1
  raycluster ray-small 2 2 | k apply -f - >/dev/null || { why="apply ray-small"; return 1; }
  wait_until 90 ray_state_is ray-small ready \
    || { why="RayCluster ray-small is '$(k get raycluster ray-small -o jsonpath='{.status.state}')' after 90 s, $(ray_bound ray-small) of $(ray_pods ray-small) pods bound"; return 1; }
  local pg min sched
  pg=$(k get podgroups.scheduling.volcano.sh ray-ray-small-pg -o jsonpath='{.spec.minMember} {.spec.queue} {.status.phase}')
  # The scheduler asked for, the one that placed the pod (the native engine sends pods to
  # kube-scheduler's own profile and keeps the asked name in an annotation), and the group.
  sched=$(k get pods -l ray.io/cluster=ray-small -o jsonpath='{range .items[*]}{.spec.schedulerName}/{.metadata.annotations.scheduling\.tephra\.io/scheduler-name}/{.metadata.annotations.scheduling\.k8s\.io/group-name}{"\n"}{end}' | sort -u)
  [ "$pg" = "3 default Running" ] || { why="KubeRay's PodGroup ray-ray-small-pg: '$pg', want '3 default Running'"; return 1; }
  case "$sched" in
    "volcano//ray-ray-small-pg" | "default-scheduler/volcano/ray-ray-small-pg") ;;
    *) why="pods' scheduler/asked/group: $sched"; return 1 ;;
  esac
  k delete raycluster ray-small --wait=false >/dev/null 2>&1 || true
  echo "#   KubeRay's PodGroup ray-ray-small-pg used as it is (minMember 3, queue default); RayCluster ready"
}
# Cores requested by the bound pods of the Ray clusters in queue $1 (KubeRay copies the
# RayCluster's queue label to its pods).
ray_queue_cpu() {
  k get pods -l "volcano.sh/queue-name=$1,ray.io/is-ray-node=yes" \
    -o jsonpath='{range .items[?(@.spec.nodeName)]}{.spec.containers[0].resources.requests.cpu}{"\n"}{end}' \
    | awk '{ s += $1 } END { print s + 0 }'
}
# Four RayClusters of 8 cpu (a head and seven workers of 1 cpu: kube-scheduler, which places
# a native gang by itself, packs pods of one size as well as the session) in each of the
# queues w1 and w3 (weights 1 and 3) on 32 cpu: the clusters never end, so the queues' shares
# are what the session keeps, reclaiming whole gangs (gangreclaim) from the queue over its
# share.
s_ray_queues_share() {
  share_queues || return 1
  local q i
  for i in 1 2 3 4; do
    for q in 1 3; do
      raycluster "ray-w$q-$i" 7 1 "w$q" | k apply -f - >/dev/null || { why="apply ray-w$q-$i"; return 1; }
    done
  done
  settle_shares ray_queue_cpu 24
  local a=$share_w1 b=$share_w3
  for i in 1 2 3 4; do k delete raycluster "ray-w1-$i" "ray-w3-$i" --wait=false >/dev/null 2>&1; done
  [ "$a" = 8 ] && [ "$b" = 24 ] || { why="cpu bound to Ray clusters: queue w1 $a, w3 $b; want 8 and 24"; return 1; }
  echo "#   Ray clusters' cpu bound: queue w1 (weight 1) $a, queue w3 (weight 3) $b"
}
extra_nodes() { # N: N more kwok nodes like the others, kwok-extra-0...
  local i
  for ((i = 0; i < $1; i++)); do kwok_node "kwok-extra-$i"; done
}
s_ray_waits_whole() {
  [ -n "${op_pids[ray]:-}" ] || { why="ray-operator is not running"; return 1; }
  wait_until 60 ray_gone ray-small || { why="ray-small's pods still there 60 s after its deletion"; return 1; }
  # A head of 1 cpu and 5 workers of 7 cpu on 4 nodes of 8: only four workers fit.
  raycluster ray-big 5 7 | k apply -f - >/dev/null || { why="apply ray-big"; return 1; }
  wait_until 30 ray_pods_are ray-big 6 || true
  local i bound
  for i in $(seq 1 20); do
    bound=$(ray_bound ray-big)
    [ "$bound" = 0 ] || { why="ray-big has $bound of 6 pods bound on a cluster that cannot hold it whole"; return 1; }
    sleep 0.5
  done
  [ "$(ray_pods ray-big)" = 6 ] || { why="KubeRay made $(ray_pods ray-big) pods for ray-big, not 6"; return 1; }
  extra_nodes 2 | k apply -f - >/dev/null || { why="adding nodes"; return 1; }
  wait_until 90 ray_state_is ray-big ready \
    || { why="ray-big is '$(k get raycluster ray-big -o jsonpath='{.status.state}')' 90 s after two nodes were added, $(ray_bound ray-big) of 6 bound"; return 1; }
  k delete raycluster ray-big --wait=false >/dev/null 2>&1 || true
  wait_until 60 ray_gone ray-big || true
  k delete node kwok-extra-0 kwok-extra-1 --wait=false >/dev/null 2>&1 || true
  echo "#   ray-big (1 + 5 × 7 cpu) waited with none of its 6 pods bound for 10 s, then ran whole once 2 nodes were added"
}

# A RayJob (K8sJobMode, the default): KubeRay makes the PodGroup before the cluster, the head
# and two workers run whole, then its submitter Job (a pod of the same group, outside
# minMember) runs to the end and the RayJob is Complete, its cluster taken down.
rayjob_status() { k get rayjob "$1" -o jsonpath='{.status.jobDeploymentStatus}/{.status.jobStatus}'; }
rayjob_is() { [ "$(rayjob_status "$1")" = "$2" ]; }
s_ray_job() {
  start_ray_operator || return 1
  fw_priority_class || return 1
  {
    printf 'apiVersion: ray.io/v1\nkind: RayJob\nmetadata:\n  name: ray-pi\n'
    printf '  labels: {volcano.sh/queue-name: default, ray.io/priority-class-name: fw-high}\nspec:\n'
    cat <<'YAML'
  entrypoint: python -c "import ray; ray.init(); print(ray.cluster_resources())"
  shutdownAfterJobFinishes: true
  submitterPodTemplate:
    metadata:
      annotations: {kwok.tephra.test/succeed-after: "3s"}
    spec:
      restartPolicy: Never
      containers:
        - name: ray-job-submitter
          image: rayproject/ray:2.46.0
          resources: {requests: {cpu: 500m, memory: 200Mi}}
  rayClusterSpec:
YAML
    ray_spec 2 2 | sed 's/^/  /'
  } | k apply -f - >/dev/null || { why="apply RayJob ray-pi"; return 1; }
  local pg
  wait_until 120 rayjob_is ray-pi Complete/SUCCEEDED \
    || { why="RayJob ray-pi is '$(rayjob_status ray-pi)' after 120 s"; return 1; }
  pg=$(pg_spec ray-ray-pi-pg)
  [ "$pg" = "3 default fw-high 5500m" ] \
    || { why="KubeRay's PodGroup ray-ray-pi-pg: '$pg', want minMember 3, queue default, fw-high, cpu 5.5"; return 1; }
  echo "#   RayJob ray-pi Complete/SUCCEEDED; PodGroup ray-ray-pi-pg used as made: $pg"
  # Its submitter (a batch Job's pod), then its cluster (taken down once the job is done).
  app_gone rayjob ray-pi job-name=ray-pi || return 1
  wait_until 60 no_pods ray.io/is-ray-node=yes || { why="ray-pi's cluster still there 60 s after the RayJob's deletion"; return 1; }
}

# --- Kubeflow's training operator: PyTorchJob -----------------------------------------------
# `--gang-scheduler-name=volcano`, as its documentation says. It creates a job's pods only
# once the PodGroup has left Pending: tephra's enqueue decides that from minResources alone.
launch_training() {
  exec "$1/operator" --gang-scheduler-name=volcano --enable-scheme=pytorchjob --kubeconfig "$KUBECONFIG"
}
# pytorchjob NAME WORKERS CPU QUEUE SUCCEED_AFTER: a master and WORKERS workers of CPU each.
pytorchjob() {
  local replica
  printf 'apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata: {name: %s}\nspec:\n' "$1"
  printf '  runPolicy:\n    schedulingPolicy: {queue: %s, priorityClass: fw-high}\n  pytorchReplicaSpecs:\n' "$4"
  for replica in Master Worker; do
    cat <<YAML
    $replica:
      replicas: $([ "$replica" = Master ] && echo 1 || echo "$2")
      restartPolicy: OnFailure
      template:
        metadata:
          labels: {fw-test: $1, fw-queue: $4}
          annotations: {kwok.tephra.test/succeed-after: "$5"}
        spec:
          containers:
            - name: pytorch
              image: docker.io/kubeflowkatib/pytorch-mnist-cpu:v0.18.0
              command: [python3, /opt/pytorch-mnist/mnist.py, --epochs=1]
              resources: {requests: {cpu: "$3", memory: 512Mi}}
YAML
  done
}
pytorch_succeeded() { condition_true pytorchjob "$1" Succeeded; }
s_pytorch_job() {
  start_operator training launch_training && fw_priority_class || return 1
  app_story pytorchjob pt-mnist 4 pt-mnist "4 default fw-high 4" pytorch_succeeded < <(pytorchjob pt-mnist 3 1 default 8s)
}

# --- Kubeflow's MPI Operator: MPIJob v2beta1 ----------------------------------------------
# `--gang-scheduling=volcano`, as its documentation says. The workers are the operator's pods,
# the launcher a batch Job's (kube-controller-manager makes its pod, into the same group).
launch_mpi() { exec "$1/operator" --kubeconfig "$KUBECONFIG"; }
# mpijob NAME WORKERS CPU QUEUE SUCCEED_AFTER: a launcher of 1 cpu ending after SUCCEED_AFTER
# and WORKERS workers of CPU (running until the job is done).
mpijob() {
  cat <<YAML
apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata: {name: $1}
spec:
  slotsPerWorker: 1
  runPolicy:
    cleanPodPolicy: Running
    schedulingPolicy: {queue: $4, priorityClass: fw-high}
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template:
        metadata:
          labels: {fw-test: $1, fw-queue: $4}
          annotations: {kwok.tephra.test/succeed-after: "$5"}
        spec:
          containers:
            - name: launcher
              image: mpioperator/mpi-pi:openmpi
              command: [mpirun, -n, "$2", /home/mpiuser/pi]
              resources: {requests: {cpu: "1", memory: 256Mi}}
    Worker:
      replicas: $2
      template:
        metadata:
          labels: {fw-test: $1, fw-queue: $4}
        spec:
          containers:
            - name: worker
              image: mpioperator/mpi-pi:openmpi
              command: [/usr/sbin/sshd, -De]
              resources: {requests: {cpu: "$3", memory: 256Mi}}
YAML
}
mpi_succeeded() { condition_true mpijob "$1" Succeeded; }
s_mpi_job() {
  start_operator mpi launch_mpi && fw_priority_class || return 1
  app_story mpijob mpi-pi 3 mpi-pi "3 default fw-high 5" mpi_succeeded < <(mpijob mpi-pi 2 2 default 8s)
}

# --- Kubeflow's Spark Operator: SparkApplication -----------------------------------------
# `--enable-batch-scheduler --default-batch-scheduler=volcano`, as its documentation says. The
# operator runs spark-submit (Spark's own, tests/frameworks/build.sh), which creates the
# driver pod; the pod's scheduler name is Spark's `spark.kubernetes.scheduler.name` (the
# operator's webhook, not run here, would set it from `batchScheduler`). On kwok the driver
# runs no JVM, so no executor is ever asked for: the PodGroup's minResources still reserve
# them.
launch_spark() {
  local server
  server=$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')
  server=${server#https://}
  SPARK_HOME="$1/spark" KUBERNETES_SERVICE_HOST=${server%:*} KUBERNETES_SERVICE_PORT=${server##*:} \
    exec "$1/operator" controller start --enable-batch-scheduler --default-batch-scheduler=volcano \
    --health-probe-bind-address=0 --enable-ui-service=false --kubeconfig "$KUBECONFIG"
}
# sparkapp NAME EXECUTORS CPU QUEUE SUCCEED_AFTER [DRIVER_CORES]: a driver of DRIVER_CORES
# (1) ending after SUCCEED_AFTER and EXECUTORS executors of CPU cores.
sparkapp() {
  cat <<YAML
apiVersion: sparkoperator.k8s.io/v1beta2
kind: SparkApplication
metadata: {name: $1}
spec:
  type: Scala
  mode: cluster
  image: spark:4.0.0
  mainClass: org.apache.spark.examples.SparkPi
  mainApplicationFile: local:///opt/spark/examples/jars/spark-examples.jar
  sparkVersion: 4.0.0
  restartPolicy: {type: Never}
  sparkConf: {spark.kubernetes.scheduler.name: volcano}
  batchSchedulerOptions: {queue: $4, priorityClassName: fw-high}
  driver:
    cores: ${6:-1}
    memory: 512m
    labels: {fw-test: $1, fw-queue: $4}
    annotations: {kwok.tephra.test/succeed-after: "$5"}
  executor:
    instances: $2
    cores: $3
    memory: 512m
    labels: {fw-test: $1, fw-queue: $4}
YAML
}
spark_completed() {
  [ "$(k get sparkapplication "$1" -o jsonpath='{.status.applicationState.state}')" = COMPLETED ]
}
s_spark_app() {
  start_operator spark launch_spark && fw_priority_class || return 1
  app_story sparkapplication spark-pi 1 spark-spark-pi-pg "1 default fw-high 3" spark_completed < <(sparkapp spark-pi 2 1 default 8s)
}

# --- Queue shares -------------------------------------------------------------------------
# Four apps of 8 cpu (each made by APP NAME QUEUE, running until deleted) in each of the
# queues w1 and w3 (weights 1 and 3) on 32 cpu: the cpu bound to each queue's apps settles at
# 8 and 24, the session reclaiming whole gangs from the queue over its share.
fw_queue_cpu() { bound_cpu "fw-queue=$1"; }
fw_queues_empty() { [ -z "$(k get pods -l 'fw-queue in (w1,w3)' -o name)" ]; }
fw_shares() {
  local app=$1 q i
  share_queues || return 1
  fw_priority_class || return 1
  for i in 1 2 3 4; do
    for q in 1 3; do
      "$app" "share-w$q-$i" "w$q" | k apply -f - >/dev/null || { why="apply share-w$q-$i"; return 1; }
    done
  done
  settle_shares fw_queue_cpu 24
  local a=$share_w1 b=$share_w3
  "$app" delete
  # The next scenario starts on an empty cluster (the operators delete what their apps made).
  wait_until 90 fw_queues_empty || { why="the apps' pods still there 90 s after their deletion"; return 1; }
  [ "$a" = 8 ] && [ "$b" = 24 ] || { why="cpu bound: queue w1 $a, w3 $b; want 8 and 24"; return 1; }
  echo "#   cpu bound: queue w1 (weight 1) $a, queue w3 (weight 3) $b"
}
# The apps: a master and seven workers of 1 cpu; a launcher and seven workers of 1 cpu; a
# driver of 8 cores (its executors, never started on kwok, reserved by minResources).
share_pytorch() {
  if [ "$1" = delete ]; then k delete pytorchjobs --all --wait=false >/dev/null 2>&1; return; fi
  pytorchjob "$1" 7 1 "$2" 1h
}
share_mpi() {
  if [ "$1" = delete ]; then k delete mpijobs --all --wait=false >/dev/null 2>&1; return; fi
  mpijob "$1" 7 1 "$2" 1h
}
share_spark() {
  # A driver pod's owner is set by the operator's pod webhook, not run here: without it,
  # deleting an application leaves its driver.
  if [ "$1" = delete ]; then
    k delete sparkapplications --all --wait=false >/dev/null 2>&1
    k delete pods -l spark-role=driver --wait=false >/dev/null 2>&1
    return
  fi
  sparkapp "$1" 1 1 "$2" 1h 8
}
s_pytorch_shares() { start_operator training launch_training || return 1; fw_shares share_pytorch; }
s_mpi_shares() { start_operator mpi launch_mpi || return 1; fw_shares share_mpi; }
s_spark_shares() { start_operator spark launch_spark || return 1; fw_shares share_spark; }
