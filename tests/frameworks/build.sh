#!/usr/bin/env bash
# Builds the batch frameworks' operators that tephra is tested with, from their published Go
# modules (the wrapper modules beside this script, versions pinned in their go.mod/go.sum),
# into ${TEPHRA_FRAMEWORKS_CACHE:-$HOME/.cache/tephra-frameworks}/<operator>-<version>/, only
# when missing, with the operator's CRDs copied into crds/ beside the binary. Prints the folder
# of each operator on its own line: `ray DIR`. Names given as arguments build only those.
#
#   ray       KubeRay's ray-operator (github.com/ray-project/kuberay/ray-operator)
#   training  Kubeflow's training operator, PyTorchJob (github.com/kubeflow/training-operator);
#             its controllers run from training/main.go (no webhook server, see there)
#   mpi       Kubeflow's MPI Operator v2 (github.com/kubeflow/mpi-operator); its controller
#             runs from mpi/main.go (no leader election or health listener, see there)
#   spark     Kubeflow's Spark Operator (github.com/kubeflow/spark-operator/v2), with the
#             Spark release it targets: Spark's own jars from Maven Central (spark-kubernetes,
#             pinned in spark/pom.xml, fetched with Maven) and a bin/spark-submit that starts
#             Spark's SparkSubmit on them, as SPARK_HOME for the operator
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/cluster/lib.sh
. "$here/../cluster/lib.sh"

need_go frameworks/build.sh
cache="${TEPHRA_FRAMEWORKS_CACHE:-$HOME/.cache/tephra-frameworks}"

# build NAME MODULE PACKAGE CRD...: PACKAGE is the main package to build (`.` for the
# wrapper's own main.go); each CRD is a path inside MODULE's source, globs allowed.
build() {
  local name=$1 module=$2 package=$3 version dir tmp start src crd
  shift 3
  version=$(awk -v m="$module" '$1 == m { print $2; exit } $1 == "require" && $2 == m { print $3; exit }' "$here/$name/go.mod")
  [ -n "$version" ] || { echo "frameworks/build.sh: $module not pinned in $name/go.mod" >&2; exit 1; }
  dir="$cache/$name-$version"
  if [ ! -x "$dir/operator" ]; then
    mkdir -p "$cache"
    tmp=$(mktemp -d "$cache/.build.XXXXXX")
    start=$(date +%s)
    echo "frameworks/build.sh: building $module $version ..." >&2
    (cd "$here/$name" && "$go_bin" build -trimpath -ldflags "-s -w" -o "$tmp/operator" "$package")
    src=$(cd "$here/$name" && "$go_bin" list -m -f '{{.Dir}}' "$module")
    mkdir -p "$tmp/crds"
    for crd in "$@"; do
      # shellcheck disable=SC2086 # the CRD paths are globs
      cp "$src"/$crd "$tmp/crds/"
    done
    if [ "$name" = spark ]; then spark_home "$tmp"; fi
    rm -rf "$dir"
    mv "$tmp" "$dir"
    echo "frameworks/build.sh: built $name in $(( $(date +%s) - start )) s" >&2
  fi
  echo "$name $dir"
}

# spark_home DIR: DIR/spark, a SPARK_HOME holding Spark's jars (the release spark/pom.xml
# names, with everything it needs at run time) and a bin/spark-submit that runs Spark's own
# SparkSubmit on them, as the launcher script of a Spark release does.
spark_home() {
  local home=$1/spark
  command -v mvn >/dev/null 2>&1 || { echo "frameworks/build.sh: Maven (mvn) is needed to fetch Spark's jars" >&2; exit 1; }
  command -v java >/dev/null 2>&1 || { echo "frameworks/build.sh: Java 17 or later is needed to run spark-submit" >&2; exit 1; }
  mkdir -p "$home/bin"
  mvn -q -B -Dstyle.color=never -f "$here/spark/pom.xml" dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$home/jars" >&2
  cat >"$home/bin/spark-submit" <<'SH'
#!/bin/sh
# Spark's submission client, as a Spark release's bin/spark-submit starts it.
home=$(cd "$(dirname "$0")/.." && pwd)
exec java ${SPARK_SUBMIT_JAVA_OPTS:-} -cp "$home/jars/*" org.apache.spark.deploy.SparkSubmit "$@"
SH
  chmod +x "$home/bin/spark-submit"
}

names=("$@")
sel() { [ "${#names[@]}" -eq 0 ] || [[ " ${names[*]} " == *" $1 "* ]]; }

if sel ray; then
  build ray github.com/ray-project/kuberay/ray-operator github.com/ray-project/kuberay/ray-operator \
    'config/crd/bases/*.yaml'
fi
if sel training; then
  build training github.com/kubeflow/training-operator . \
    manifests/base/crds/kubeflow.org_pytorchjobs.yaml
fi
if sel mpi; then
  build mpi github.com/kubeflow/mpi-operator . manifests/base/kubeflow.org_mpijobs.yaml
fi
if sel spark; then
  build spark github.com/kubeflow/spark-operator/v2 github.com/kubeflow/spark-operator/v2/cmd/operator \
    'config/crd/bases/*.yaml'
fi
