#!/usr/bin/env python3
"""The official Python kubernetes client as a real outside client of the embedded API.

Starts `tephra apiserver` on a free loopback port, waits for /healthz, then drives it with
`kubernetes.client` exactly as a user's script would: nodes and discovery, ConfigMap and Pod
CRUD (strategic merge, JSON and merge patches, server-side apply), errors as `ApiException`
with a `Status` body, label and field selectors, paging, `watch.Watch().stream()` (live,
resumed from a resourceVersion, ended by `timeout_seconds`), tephra's CRDs applied with
`utils.create_from_yaml`, a vcJob through `CustomObjectsApi` (schema defaults, merge patch,
status subresource, label selector, watch), a cluster-scoped Queue and its status
subresource, `pods/binding` and `pods/eviction`, namespace deletion.

Every check prints `ok - ...`; a failing group prints `FAIL - ...` and the run goes on with the
next group. The last line is `python-client: N passed, M failed`; the exit code is 1 when
anything failed. The server is always stopped, and the whole run has a hard deadline.

Environment:
  TEPHRA_BIN               the tephra binary (default: $CARGO_TARGET_DIR/debug/tephra, else
                           <repo>/target/debug/tephra)

The vcJob it creates is our own, `tests/data/manifests/vcjob.yaml`: the script needs nothing
outside the repository.
"""

from __future__ import annotations

import datetime
import glob
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.request
from pathlib import Path

import yaml
from kubernetes import client, dynamic, utils, watch
from kubernetes.client.exceptions import ApiException

ROOT = Path(__file__).resolve().parents[2]
NS = "default"
# The whole run, server start included; every single wait below is much shorter.
DEADLINE_SECONDS = 45


class CheckFailed(Exception):
    """A check saw something a real API server would not do."""


class Deadline(BaseException):
    """The whole run took too long (BaseException: no group may swallow it)."""


PASSED = 0
FAILED = 0


def ok(what: str) -> None:
    global PASSED
    PASSED += 1
    print(f"ok - {what}", flush=True)


def expect(cond: bool, what: str) -> None:
    if not cond:
        raise CheckFailed(what)


def expect_eq(actual, wanted, what: str) -> None:
    if actual != wanted:
        raise CheckFailed(f"{what}: got {actual!r}, want {wanted!r}")


def expect_api_error(call, status: int, reason: str, what: str) -> dict:
    """Runs `call`, which must raise an ApiException with this HTTP status and a Status body
    of this reason; returns the Status body."""
    try:
        call()
    except ApiException as e:
        expect_eq(e.status, status, f"{what}: HTTP status")
        try:
            body = json.loads(e.body)
        except (TypeError, ValueError):
            raise CheckFailed(f"{what}: error body is not JSON: {e.body!r}") from None
        expect_eq(body.get("kind"), "Status", f"{what}: error body kind")
        expect_eq(body.get("apiVersion"), "v1", f"{what}: error body apiVersion")
        expect_eq(body.get("status"), "Failure", f"{what}: Status.status")
        expect_eq(body.get("reason"), reason, f"{what}: Status.reason")
        expect_eq(body.get("code"), status, f"{what}: Status.code")
        expect(bool(body.get("message")), f"{what}: Status has no message: {body}")
        return body
    raise CheckFailed(f"{what}: no ApiException, want {status} {reason}")


def poll(fetch, done, what: str, timeout: float = 10.0):
    """Calls `fetch` until `done(result)` holds; bounded by `timeout` seconds."""
    end = time.monotonic() + timeout
    while True:
        result = fetch()
        if done(result):
            return result
        if time.monotonic() > end:
            raise CheckFailed(f"{what}: not reached after {timeout}s (last: {result!r})")
        time.sleep(0.05)


def gone(read) -> bool:
    """True when `read()` raises a 404 ApiException."""
    try:
        read()
    except ApiException as e:
        if e.status == 404:
            return True
        raise
    return False


# ---------------------------------------------------------------------------------------------
# Server


def tephra_bin() -> Path:
    if os.environ.get("TEPHRA_BIN"):
        return Path(os.environ["TEPHRA_BIN"])
    target = os.environ.get("CARGO_TARGET_DIR") or str(ROOT / "target")
    return Path(target) / "debug" / "tephra"


def manifest(name: str) -> Path:
    """One of our own test manifests (tests/data/manifests/)."""
    return ROOT / "tests" / "data" / "manifests" / name


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=0.5) as r:
            return r.status == 200
    except OSError:
        return False


class Server:
    """`tephra apiserver` on a free loopback port, its output in a temporary log file."""

    def __init__(self, binary: Path):
        self.binary = binary
        self.proc: subprocess.Popen | None = None
        self.port = 0
        self.log = tempfile.NamedTemporaryFile(prefix="tephra-apiserver-", suffix=".log")

    def start(self) -> None:
        if not self.binary.is_file():
            raise CheckFailed(f"no tephra binary at {self.binary} (cargo build --bin tephra, or set TEPHRA_BIN)")
        # The free port may be taken between the probe and the bind: try a few.
        for _ in range(3):
            self.port = free_port()
            self.log.truncate(0)
            self.proc = subprocess.Popen(
                [str(self.binary), "apiserver", "--listen", f"127.0.0.1:{self.port}"],
                stdin=subprocess.DEVNULL,
                stdout=self.log,
                stderr=subprocess.STDOUT,
            )
            end = time.monotonic() + 15
            while time.monotonic() < end:
                if healthy(self.port):
                    return
                if self.proc.poll() is not None:
                    break
                time.sleep(0.1)
            if self.proc.poll() is None:
                raise CheckFailed(f"/healthz not answering after 15s on port {self.port}")
            if "in use" not in self.log_text():
                raise CheckFailed(f"tephra apiserver exited with {self.proc.returncode}")
        raise CheckFailed("could not bind a free port")

    def log_text(self) -> str:
        try:
            return Path(self.log.name).read_text(errors="replace")
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self.log.close()


# ---------------------------------------------------------------------------------------------
# Checks. Each group gets the ApiClient; a failure ends its group only.


def meta(name: str, labels: dict | None = None) -> client.V1ObjectMeta:
    return client.V1ObjectMeta(name=name, labels=labels)


def pod_body(name: str, labels: dict | None = None) -> client.V1Pod:
    return client.V1Pod(
        metadata=meta(name, labels),
        spec=client.V1PodSpec(
            containers=[
                client.V1Container(
                    name="main",
                    image="nginx:1.25",
                    resources=client.V1ResourceRequirements(requests={"cpu": "100m", "memory": "64Mi"}),
                )
            ]
        ),
    )


def check_server_and_nodes(api: client.ApiClient, server: Server) -> None:
    expect("no authentication" in server.log_text().lower(), "the log does not warn that there is no authentication")
    ok(f"tephra apiserver up on port {server.port}, its log warns about missing authentication")

    version = client.VersionApi(api).get_code()
    expect(bool(version.git_version) and bool(version.major), f"/version: {version}")
    core_versions = client.CoreApi(api).get_api_versions()
    expect("v1" in core_versions.versions, f"/api versions: {core_versions.versions}")
    groups = {g.name for g in client.ApisApi(api).get_api_versions().groups}
    expect({"apps", "apiextensions.k8s.io", "coordination.k8s.io"} <= groups, f"/apis groups: {sorted(groups)}")
    apps = client.AppsApi(api).get_api_group()
    expect_eq(apps.preferred_version.group_version, "apps/v1", "/apis/apps/ preferred version")
    resources = {r.name for r in client.CoreV1Api(api).get_api_resources().resources}
    expect({"pods", "pods/binding", "pods/status", "configmaps", "nodes"} <= resources, f"/api/v1 resources: {sorted(resources)}")
    ok(f"discovery and version ({version.git_version}) deserialize into the client's models")

    nodes = client.CoreV1Api(api).list_node()
    expect(len(nodes.items) > 0, "no nodes listed")
    for node in nodes.items:
        ready = [c.status for c in node.status.conditions or [] if c.type == "Ready"]
        expect_eq(ready, ["True"], f"Ready condition of node {node.metadata.name}")
        expect_eq(node.status.allocatable.get("pods"), "110", f"allocatable pods of {node.metadata.name}")
    expect(bool(nodes.metadata.resource_version), "NodeList has no resourceVersion")
    one = client.CoreV1Api(api).read_node(nodes.items[0].metadata.name)
    expect_eq(one.metadata.labels.get("kubernetes.io/hostname"), one.metadata.name, "node hostname label")
    ok(f"{len(nodes.items)} nodes listed, all Ready; read_node")


def check_configmap(api: client.ApiClient) -> None:
    v1 = client.CoreV1Api(api)
    name = "py-cm"
    created = v1.create_namespaced_config_map(
        NS, client.V1ConfigMap(metadata=meta(name, {"app": "pyclient"}), data={"k": "v"})
    )
    expect(bool(created.metadata.uid), "created ConfigMap has no uid")
    expect(bool(created.metadata.resource_version), "created ConfigMap has no resourceVersion")
    expect(created.metadata.creation_timestamp is not None, "created ConfigMap has no creationTimestamp")
    expect_eq(created.metadata.namespace, NS, "namespace of the created ConfigMap")
    expect_eq((created.kind, created.api_version), ("ConfigMap", "v1"), "kind and apiVersion")
    ok("create ConfigMap: uid, resourceVersion, creationTimestamp, namespace set")

    read = v1.read_namespaced_config_map(name, NS)
    expect_eq(read.data, {"k": "v"}, "read data")
    expect_eq(read.metadata.uid, created.metadata.uid, "read uid")

    read.data["k2"] = "v2"
    replaced = v1.replace_namespaced_config_map(name, NS, read)
    expect_eq(replaced.data, {"k": "v", "k2": "v2"}, "replaced data")
    expect(replaced.metadata.resource_version != read.metadata.resource_version, "replace did not change resourceVersion")
    ok("read and replace ConfigMap")

    stale = read  # still carries the old resourceVersion
    stale.data["k3"] = "lost"
    body = expect_api_error(lambda: v1.replace_namespaced_config_map(name, NS, stale), 409, "Conflict", "replace with a stale resourceVersion")
    expect("the object has been modified" in body["message"], f"Conflict message: {body['message']}")
    ok("replace with a stale resourceVersion: ApiException 409 Conflict")

    body = expect_api_error(
        lambda: v1.create_namespaced_config_map(NS, client.V1ConfigMap(metadata=meta(name))), 409, "AlreadyExists", "create twice"
    )
    expect_eq((body.get("details") or {}).get("name"), name, "AlreadyExists details.name")
    ok("create an existing name: ApiException 409 AlreadyExists")

    # A dict body goes out as a strategic merge patch, a list as a JSON patch.
    patched = v1.patch_namespaced_config_map(name, NS, {"data": {"k3": "v3"}, "metadata": {"labels": {"patched": "yes"}}})
    expect_eq(patched.data, {"k": "v", "k2": "v2", "k3": "v3"}, "data after strategic merge patch")
    expect_eq(patched.metadata.labels, {"app": "pyclient", "patched": "yes"}, "labels after strategic merge patch")
    patched = v1.patch_namespaced_config_map(name, NS, [{"op": "remove", "path": "/data/k"}])
    expect_eq(patched.data, {"k2": "v2", "k3": "v3"}, "data after JSON patch")
    patched = v1.patch_namespaced_config_map(
        name, NS, {"data": {"k2": None}}, _content_type="application/merge-patch+json"
    )
    expect_eq(patched.data, {"k3": "v3"}, "data after merge patch with null")
    expect_api_error(
        lambda: v1.patch_namespaced_config_map(name, NS, [{"op": "test", "path": "/data/k3", "value": "other"}]),
        422,
        "Invalid",
        "failing JSON patch test op",
    )
    ok("patch ConfigMap: strategic merge (dict), JSON patch (list), merge patch; failing test op refused")

    applied = v1.patch_namespaced_config_map(
        "py-applied",
        NS,
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "py-applied"}, "data": {"a": "1"}},
        field_manager="pyclient",
        _content_type="application/apply-patch+yaml",
    )
    expect_eq(applied.data, {"a": "1"}, "server-side apply created the ConfigMap")
    applied = v1.patch_namespaced_config_map(
        "py-applied",
        NS,
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "py-applied"}, "data": {"a": "2"}},
        field_manager="pyclient",
        _content_type="application/apply-patch+yaml",
    )
    expect_eq(applied.data, {"a": "2"}, "server-side apply updated the ConfigMap")
    v1.delete_namespaced_config_map("py-applied", NS)
    ok("server-side apply (application/apply-patch+yaml) creates and updates")

    status = v1.delete_namespaced_config_map(name, NS)
    expect(status is not None, "delete returned nothing")
    body = expect_api_error(lambda: v1.read_namespaced_config_map(name, NS), 404, "NotFound", "read after delete")
    details = body.get("details") or {}
    expect_eq((details.get("name"), details.get("kind")), (name, "configmaps"), "NotFound details")
    expect_eq(body.get("message"), f'configmaps "{name}" not found', "NotFound message")
    expect_api_error(lambda: v1.delete_namespaced_config_map(name, NS), 404, "NotFound", "delete twice")
    ok("delete ConfigMap; read and delete afterwards: ApiException 404 NotFound with details")

    expect_api_error(
        lambda: v1.create_namespaced_config_map("no-such-ns", client.V1ConfigMap(metadata=meta("x"))),
        404,
        "NotFound",
        "create in a missing namespace",
    )
    ok("create in a missing namespace: 404 NotFound")


def check_pod(api: client.ApiClient) -> None:
    v1 = client.CoreV1Api(api)
    name = "py-pod"
    created = v1.create_namespaced_pod(NS, pod_body(name, {"app": "pyclient"}))
    expect_eq(created.status.phase, "Pending", "phase of a new pod")
    expect_eq(created.spec.containers[0].image, "nginx:1.25", "container image")
    ok("create Pod (Pending)")

    read = v1.read_namespaced_pod(name, NS)
    read.metadata.labels["replaced"] = "yes"
    replaced = v1.replace_namespaced_pod(name, NS, read)
    expect_eq(replaced.metadata.labels, {"app": "pyclient", "replaced": "yes"}, "labels after replace")
    ok("read and replace Pod")

    # Strategic merge: containers merge by name, so the image changes and resources stay.
    patched = v1.patch_namespaced_pod(name, NS, {"spec": {"containers": [{"name": "main", "image": "nginx:1.27"}]}})
    expect_eq(len(patched.spec.containers), 1, "containers after strategic merge patch")
    expect_eq(patched.spec.containers[0].image, "nginx:1.27", "image after strategic merge patch")
    expect_eq(patched.spec.containers[0].resources.requests, {"cpu": "100m", "memory": "64Mi"}, "resources kept by the merge")
    ok("strategic merge patch of a Pod merges containers by name")

    pods = v1.list_namespaced_pod(NS, field_selector=f"metadata.name={name},status.phase=Pending")
    expect_eq([p.metadata.name for p in pods.items], [name], "pods by metadata.name and status.phase")
    pods = v1.list_pod_for_all_namespaces(field_selector="spec.nodeName=", label_selector="app=pyclient")
    expect_eq([p.metadata.name for p in pods.items], [name], "unbound pods (spec.nodeName=) in all namespaces")
    ok("fieldSelector on pods (metadata.name, status.phase, empty spec.nodeName)")

    v1.delete_namespaced_pod(name, NS)
    poll(lambda: gone(lambda: v1.read_namespaced_pod(name, NS)), bool, "unbound pod deleted")
    ok("delete Pod")


def check_selectors(api: client.ApiClient) -> None:
    v1 = client.CoreV1Api(api)
    for name, labels in [
        ("sel-a", {"app": "py-sel", "tier": "front"}),
        ("sel-b", {"app": "py-sel", "tier": "back"}),
        ("sel-c", {"app": "py-sel"}),
    ]:
        v1.create_namespaced_config_map(NS, client.V1ConfigMap(metadata=meta(name, labels)))

    def names(**kw) -> list[str]:
        return sorted(c.metadata.name for c in v1.list_namespaced_config_map(NS, **kw).items)

    expect_eq(names(label_selector="app=py-sel,tier=front"), ["sel-a"], "tier=front")
    expect_eq(names(label_selector="app==py-sel,tier!=front"), ["sel-b", "sel-c"], "tier!=front")
    expect_eq(names(label_selector="tier in (front,back)"), ["sel-a", "sel-b"], "tier in (front,back)")
    expect_eq(names(label_selector="app=py-sel,tier notin (front)"), ["sel-b", "sel-c"], "tier notin (front)")
    expect_eq(names(label_selector="app=py-sel,tier"), ["sel-a", "sel-b"], "tier exists")
    expect_eq(names(label_selector="app=py-sel,!tier"), ["sel-c"], "!tier")
    ok("labelSelector: =, ==, !=, in, notin, exists, !exists")

    expect_eq(names(field_selector="metadata.name=sel-b"), ["sel-b"], "metadata.name=sel-b")
    expect_eq(names(label_selector="app=py-sel", field_selector="metadata.name!=sel-b"), ["sel-a", "sel-c"], "metadata.name!=")
    everywhere = v1.list_config_map_for_all_namespaces(field_selector="metadata.namespace=default", label_selector="app=py-sel")
    expect_eq(len(everywhere.items), 3, "metadata.namespace=default in all namespaces")
    ok("fieldSelector: metadata.name (=, !=), metadata.namespace")

    first = v1.list_namespaced_config_map(NS, label_selector="app=py-sel", limit=2)
    expect_eq(len(first.items), 2, "first page size")
    expect(bool(first.metadata._continue), "first page has no continue token")
    rest = v1.list_namespaced_config_map(NS, label_selector="app=py-sel", limit=2, _continue=first.metadata._continue)
    expect_eq(len(rest.items), 1, "second page size")
    expect(not rest.metadata._continue, "last page has a continue token")
    paged = sorted(c.metadata.name for c in first.items + rest.items)
    expect_eq(paged, ["sel-a", "sel-b", "sel-c"], "pages together")
    ok("limit and continue")

    expect_api_error(lambda: names(label_selector="tier in front"), 400, "BadRequest", "malformed labelSelector")
    expect_api_error(lambda: names(field_selector="metadata.name"), 400, "BadRequest", "malformed fieldSelector")
    ok("malformed labelSelector and fieldSelector: 400 BadRequest")

    v1.delete_collection_namespaced_config_map(NS, label_selector="app=py-sel")
    poll(lambda: names(label_selector="app=py-sel"), lambda n: n == [], "deletecollection by label")
    ok("deletecollection by labelSelector")


def check_watch(api: client.ApiClient) -> None:
    v1 = client.CoreV1Api(api)
    selector = "app=py-watch"
    rv0 = v1.list_namespaced_config_map(NS, label_selector=selector).metadata.resource_version
    events: list[dict] = []
    errors: list[BaseException] = []
    w = watch.Watch()

    def run() -> None:
        try:
            for e in w.stream(v1.list_namespaced_config_map, NS, label_selector=selector, resource_version=rv0, timeout_seconds=10):
                events.append(e)
                if e["type"] == "DELETED":
                    w.stop()
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    name = "py-watched"
    v1.create_namespaced_config_map(NS, client.V1ConfigMap(metadata=meta(name, {"app": "py-watch"}), data={"n": "1"}))
    v1.patch_namespaced_config_map(name, NS, {"data": {"n": "2"}})
    v1.delete_namespaced_config_map(name, NS)
    t.join(timeout=12)
    expect(not t.is_alive(), "watch did not end after DELETED nor at its timeout")
    if errors:
        raise errors[0]
    expect_eq([e["type"] for e in events], ["ADDED", "MODIFIED", "DELETED"], "watch event types")
    for e in events:
        expect(isinstance(e["object"], client.V1ConfigMap), f"watch object is {type(e['object']).__name__}, not V1ConfigMap")
        expect_eq(e["object"].metadata.name, name, "watched object name")
    expect_eq([e["object"].data for e in events[:2]], [{"n": "1"}, {"n": "2"}], "watched data")
    rvs = [int(e["object"].metadata.resource_version) for e in events]
    expect(rvs == sorted(rvs) and len(set(rvs)) == 3, f"watch resourceVersions not increasing: {rvs}")
    ok("watch.Watch().stream() saw ADDED, MODIFIED, DELETED as V1ConfigMap objects")

    # Resume from the ADDED event's version: exactly what came after it.
    resumed: list[str] = []
    w2 = watch.Watch()
    for e in w2.stream(
        v1.list_namespaced_config_map, NS, label_selector=selector, resource_version=events[0]["object"].metadata.resource_version, timeout_seconds=5
    ):
        resumed.append(e["type"])
        if e["type"] == "DELETED":
            w2.stop()
    expect_eq(resumed, ["MODIFIED", "DELETED"], "events after a resumed resourceVersion")
    expect_eq(w2.resource_version, events[2]["object"].metadata.resource_version, "Watch.resource_version after the resume")
    ok("watch resumed from a resourceVersion replays only later events")

    # No resourceVersion: a synthetic ADDED for what exists, then the timeout ends the stream.
    v1.create_namespaced_config_map(NS, client.V1ConfigMap(metadata=meta("py-existing", {"app": "py-watch"})))
    seen: list[tuple[str, str]] = []
    start = time.monotonic()
    for e in watch.Watch().stream(v1.list_namespaced_config_map, NS, label_selector=selector, timeout_seconds=1):
        seen.append((e["type"], e["object"].metadata.name))
    elapsed = time.monotonic() - start
    expect_eq(seen, [("ADDED", "py-existing")], "watch without resourceVersion")
    expect(elapsed < 4, f"a watch with timeout_seconds=1 lasted {elapsed:.1f}s")
    v1.delete_namespaced_config_map("py-existing", NS)
    ok(f"watch without resourceVersion lists existing objects as ADDED and ends at timeout_seconds ({elapsed:.1f}s)")

    # Bookmarks asked for: the client handles them itself; only real events come through.
    bm = watch.Watch()
    types = [e["type"] for e in bm.stream(v1.list_namespaced_config_map, NS, label_selector=selector, resource_version=rv0, allow_watch_bookmarks=True, timeout_seconds=1)]
    expect(set(types) <= {"ADDED", "MODIFIED", "DELETED", "BOOKMARK"}, f"event types with bookmarks: {types}")
    ok("watch with allow_watch_bookmarks")


def load_yaml_docs(path: str) -> list[dict]:
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def check_crds(api: client.ApiClient) -> None:
    files = sorted(glob.glob(str(ROOT / "manifests" / "crds" / "*.yaml")))
    expect(len(files) > 0, "no CRD manifests under manifests/crds/")
    for f in files:
        utils.create_from_yaml(api, f)
    ext = client.ApiextensionsV1Api(api)
    names = [d["metadata"]["name"] for f in files for d in load_yaml_docs(f)]
    for n in names:
        def established(n=n) -> bool:
            crd = ext.read_custom_resource_definition(n)
            return any(c.type == "Established" and c.status == "True" for c in (crd.status.conditions or []) if crd.status)

        poll(established, bool, f"CRD {n} Established")
    listed = {c.metadata.name for c in ext.list_custom_resource_definition().items}
    expect(set(names) <= listed, f"CRDs listed: {sorted(listed)}")
    ok(f"{len(names)} CRDs from manifests/crds/ created with utils.create_from_yaml and Established")

    crd = ext.read_custom_resource_definition("jobs.batch.volcano.sh")
    expect_api_error(lambda: ext.create_custom_resource_definition(crd), 409, "AlreadyExists", "CRD created twice")
    crd.metadata.annotations = dict(crd.metadata.annotations or {}, **{"pyclient": "replaced"})
    replaced = ext.replace_custom_resource_definition(crd.metadata.name, crd)
    expect_eq(replaced.metadata.annotations.get("pyclient"), "replaced", "CRD annotation after replace")
    resources = client.CustomObjectsApi(api).get_api_resources("batch.volcano.sh", "v1alpha1")
    jobs = [r for r in resources.resources if r.name == "jobs"]
    expect(len(jobs) == 1 and "vcjob" in (jobs[0].short_names or []), f"discovery of batch.volcano.sh/v1alpha1: {resources}")
    ok("CRD replace through ApiextensionsV1Api; its resource is in discovery with short names")


def check_vcjob(api: client.ApiClient) -> None:
    co = client.CustomObjectsApi(api)
    group, version, plural = "batch.volcano.sh", "v1alpha1", "jobs"
    docs = load_yaml_docs(str(manifest("vcjob.yaml")))
    job = docs[0]
    replicas = job["spec"]["tasks"][0]["replicas"]
    name = job["metadata"]["name"]
    # Leave the queue out so the CRD's schema default has to fill it in.
    job["spec"].pop("queue", None)
    job["metadata"]["labels"] = {"app": "pyclient"}

    rv0 = co.list_namespaced_custom_object(group, version, NS, plural)["metadata"]["resourceVersion"]
    created = co.create_namespaced_custom_object(group, version, NS, plural, job)
    expect_eq(created["spec"].get("queue"), "default", "spec.queue defaulted by the schema")
    expect_eq(created["metadata"].get("generation"), 1, "generation of a new vcJob")
    expect(bool(created["metadata"].get("uid")), "vcJob has no uid")
    got = co.get_namespaced_custom_object(group, version, NS, plural, name)
    expect_eq((got["apiVersion"], got["kind"]), ("batch.volcano.sh/v1alpha1", "Job"), "apiVersion and kind")
    expect_eq(got["spec"]["queue"], "default", "spec.queue read back")
    expect_eq(got["spec"]["tasks"][0]["replicas"], replicas, "tasks[0].replicas")
    ok(f"vcJob {name} from tests/data/manifests/vcjob.yaml created and read; schema default spec.queue=default")

    patched = co.patch_namespaced_custom_object(group, version, NS, plural, name, {"metadata": {"labels": {"team": "alpha"}}, "spec": {"maxRetry": 7}})
    expect_eq(patched["spec"]["maxRetry"], 7, "maxRetry after merge patch")
    expect_eq(patched["metadata"]["labels"], {"app": "pyclient", "team": "alpha"}, "labels after merge patch")
    expect_eq(patched["metadata"]["generation"], 2, "generation after a spec change")
    ok("merge patch of the vcJob (labels and spec); generation bumped")

    listed = co.list_namespaced_custom_object(group, version, NS, plural, label_selector="team=alpha")
    expect_eq([j["metadata"]["name"] for j in listed["items"]], [name], "vcJobs with team=alpha")
    expect_eq(listed["kind"], "JobList", "list kind")
    none = co.list_cluster_custom_object(group, version, plural, label_selector="team=beta")
    expect_eq(none["items"], [], "vcJobs with team=beta in all namespaces")
    ok("vcJobs listed by labelSelector (namespaced and across namespaces)")

    status = co.patch_namespaced_custom_object_status(group, version, NS, plural, name, {"status": {"state": {"phase": "Running"}}})
    expect_eq(status["status"]["state"]["phase"], "Running", "status written through the status subresource")
    expect_eq(status["metadata"]["generation"], 2, "generation after a status change")
    ok("vcJob status subresource")

    types: list[str] = []
    w = watch.Watch()
    for e in w.stream(co.list_namespaced_custom_object, group, version, NS, plural, resource_version=rv0, timeout_seconds=5):
        types.append(e["type"])
        expect(isinstance(e["object"], dict) and e["object"]["metadata"]["name"] == name, f"watched custom object: {e['object']!r}")
        if len(types) == 3:
            w.stop()
    expect_eq(types, ["ADDED", "MODIFIED", "MODIFIED"], "vcJob watch from before its creation")
    ok("watch of vcJobs through CustomObjectsApi")

    co.delete_namespaced_custom_object(group, version, NS, plural, name)
    poll(lambda: gone(lambda: co.get_namespaced_custom_object(group, version, NS, plural, name)), bool, "vcJob deleted")
    expect_api_error(lambda: co.get_namespaced_custom_object(group, version, NS, plural, name), 404, "NotFound", "vcJob after delete")
    ok("vcJob deleted; get afterwards is 404 NotFound")


def check_queue(api: client.ApiClient) -> None:
    co = client.CustomObjectsApi(api)
    group, version, plural = "scheduling.volcano.sh", "v1beta1", "queues"
    name = "py-queue"
    body = {"apiVersion": f"{group}/{version}", "kind": "Queue", "metadata": {"name": name}, "spec": {}}
    created = co.create_cluster_custom_object(group, version, plural, body)
    expect("namespace" not in created["metadata"], f"cluster-scoped Queue has a namespace: {created['metadata']}")
    expect_eq(created["spec"].get("weight"), 1, "spec.weight defaulted by the schema")
    ok("cluster-scoped Queue created; schema default spec.weight=1")

    s = co.patch_cluster_custom_object_status(group, version, plural, name, {"status": {"state": "Open", "running": 1}})
    expect_eq(s["status"].get("state"), "Open", "status.state via the status subresource")
    main = co.patch_cluster_custom_object(group, version, plural, name, {"spec": {"weight": 3}, "status": {"state": "Closed"}})
    expect_eq((main["spec"]["weight"], main["status"]["state"]), (3, "Open"), "main endpoint: spec changes, status ignored")
    st = co.patch_cluster_custom_object_status(group, version, plural, name, {"spec": {"weight": 9}, "status": {"state": "Closed"}})
    expect_eq((st["spec"]["weight"], st["status"]["state"]), (3, "Closed"), "status endpoint: status changes, spec ignored")
    read = co.get_cluster_custom_object_status(group, version, plural, name)
    expect_eq(read["status"]["state"], "Closed", "get_cluster_custom_object_status")
    ok("Queue status subresource: status endpoint writes status only, main endpoint spec only")

    names = [q["metadata"]["name"] for q in co.list_cluster_custom_object(group, version, plural)["items"]]
    expect(name in names, f"Queue list: {names}")
    co.delete_cluster_custom_object(group, version, plural, name)
    poll(lambda: gone(lambda: co.get_cluster_custom_object(group, version, plural, name)), bool, "Queue deleted")
    ok("Queue listed and deleted")


def check_binding(api: client.ApiClient) -> None:
    v1 = client.CoreV1Api(api)
    node = v1.list_node().items[0].metadata.name
    name = "py-bind"
    v1.create_namespaced_pod(NS, pod_body(name))
    binding = client.V1Binding(
        metadata=meta(name), target=client.V1ObjectReference(api_version="v1", kind="Node", name=node)
    )
    # The API answers a binding with a Status, which the client cannot read as the V1Binding
    # it declares: take the raw response.
    resp = v1.create_namespaced_pod_binding(name, NS, binding, _preload_content=False)
    expect_eq(resp.status, 201, "binding HTTP status")
    answer = json.loads(resp.data)
    expect_eq((answer.get("kind"), answer.get("status")), ("Status", "Success"), "binding response")
    pod = v1.read_namespaced_pod(name, NS)
    expect_eq(pod.spec.node_name, node, "spec.nodeName after binding")
    ok(f"pods/binding through create_namespaced_pod_binding bound the pod to {node}")

    expect_api_error(
        lambda: v1.create_namespaced_pod_binding(name, NS, binding, _preload_content=False), 409, "Conflict", "binding a bound pod"
    )
    ok("binding a bound pod: 409 Conflict")

    running = poll(lambda: v1.read_namespaced_pod_status(name, NS).status.phase, lambda p: p == "Running", "bound pod Running")
    expect_eq(running, "Running", "phase")
    ok("the kubelet stand-in runs the bound pod (read_namespaced_pod_status)")

    eviction = client.V1Eviction(metadata=meta(name, None))
    eviction.metadata.namespace = NS
    resp = v1.create_namespaced_pod_eviction(name, NS, eviction, _preload_content=False)
    expect_eq(resp.status, 201, "eviction HTTP status")
    poll(
        lambda: gone(lambda: v1.read_namespaced_pod(name, NS)) or v1.read_namespaced_pod(name, NS).metadata.deletion_timestamp is not None,
        bool,
        "evicted pod deleted",
    )
    ok("pods/eviction through create_namespaced_pod_eviction deletes the pod")


def check_delete_options(api: client.ApiClient) -> None:
    v1 = client.CoreV1Api(api)
    apps = client.AppsV1Api(api)

    def owner_and_dependent(name: str) -> client.V1ReplicaSet:
        rs = apps.create_namespaced_replica_set(
            NS,
            client.V1ReplicaSet(
                metadata=meta(name),
                spec=client.V1ReplicaSetSpec(
                    replicas=0,
                    selector=client.V1LabelSelector(match_labels={"rs": name}),
                    template=client.V1PodTemplateSpec(metadata=meta(None, {"rs": name}), spec=pod_body("x").spec),
                ),
            ),
        )
        ref = client.V1OwnerReference(
            api_version="apps/v1", kind="ReplicaSet", name=name, uid=rs.metadata.uid, controller=True, block_owner_deletion=True
        )
        dep = client.V1ConfigMap(metadata=meta(f"{name}-dep"))
        dep.metadata.owner_references = [ref]
        v1.create_namespaced_config_map(NS, dep)
        return rs

    owner_and_dependent("py-rs-fg")
    apps.delete_namespaced_replica_set("py-rs-fg", NS, propagation_policy="Foreground")
    poll(lambda: gone(lambda: apps.read_namespaced_replica_set("py-rs-fg", NS)), bool, "owner deleted in the foreground")
    expect(gone(lambda: v1.read_namespaced_config_map("py-rs-fg-dep", NS)), "the dependent outlived a foreground deletion")
    ok("foreground deletion (propagation_policy) removes the dependent first, then the owner")

    owner_and_dependent("py-rs-orphan")
    # The client sends these options as a DeleteOptions body, as kubectl does.
    apps.delete_namespaced_replica_set("py-rs-orphan", NS, body=client.V1DeleteOptions(propagation_policy="Orphan"))
    poll(lambda: gone(lambda: apps.read_namespaced_replica_set("py-rs-orphan", NS)), bool, "orphaning delete")
    orphan = poll(
        lambda: v1.read_namespaced_config_map("py-rs-orphan-dep", NS),
        lambda c: not c.metadata.owner_references,
        "ownerReference removed from the orphan",
    )
    v1.delete_namespaced_config_map(orphan.metadata.name, NS)
    ok("DeleteOptions body with propagationPolicy=Orphan keeps the dependent and drops its ownerReference")

    owner_and_dependent("py-rs-bg")
    apps.delete_namespaced_replica_set("py-rs-bg", NS)
    poll(lambda: gone(lambda: v1.read_namespaced_config_map("py-rs-bg-dep", NS)), bool, "dependent collected in the background")
    ok("background deletion: the garbage collector removes the dependent")

    cm = v1.create_namespaced_config_map(NS, client.V1ConfigMap(metadata=meta("py-precond")))
    wrong = client.V1DeleteOptions(preconditions=client.V1Preconditions(uid="00000000-0000-0000-0000-000000000000"))
    expect_api_error(lambda: v1.delete_namespaced_config_map("py-precond", NS, body=wrong), 409, "Conflict", "delete with a wrong uid precondition")
    right = client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=cm.metadata.uid, resource_version=cm.metadata.resource_version))
    v1.delete_namespaced_config_map("py-precond", NS, body=right)
    expect(gone(lambda: v1.read_namespaced_config_map("py-precond", NS)), "delete with matching preconditions did not delete")
    ok("delete preconditions: a wrong uid is 409 Conflict, matching uid and resourceVersion delete")


def check_events(api: client.ApiClient) -> None:
    v1 = client.CoreV1Api(api)
    ev = client.CoreV1Event(
        metadata=client.V1ObjectMeta(generate_name="py-pod."),
        involved_object=client.V1ObjectReference(kind="Pod", namespace=NS, name="py-evented", api_version="v1"),
        reason="Scheduled",
        message="Successfully assigned default/py-evented to node-1",
        type="Normal",
        source=client.V1EventSource(component="tephra"),
        count=1,
    )
    created = v1.create_namespaced_event(NS, ev)
    expect(created.metadata.name.startswith("py-pod.") and len(created.metadata.name) > len("py-pod."), f"generateName: {created.metadata.name}")
    listed = v1.list_namespaced_event(NS, field_selector="involvedObject.name=py-evented,involvedObject.kind=Pod")
    expect_eq([e.reason for e in listed.items], ["Scheduled"], "events by involvedObject")
    v1.delete_namespaced_event(created.metadata.name, NS)
    ok("core Event with generateName; listed by involvedObject.name/kind")

    events = client.EventsV1Api(api)
    new = events.create_namespaced_event(
        NS,
        client.EventsV1Event(
            metadata=meta("py-event"),
            event_time=datetime.datetime.now(datetime.timezone.utc),
            reporting_controller="tephra.io/scheduler",
            reporting_instance="tephra-0",
            action="Binding",
            reason="Scheduled",
            regarding=client.V1ObjectReference(kind="Pod", namespace=NS, name="py-evented"),
            type="Normal",
            note="bound",
        ),
    )
    expect_eq(new.reporting_controller, "tephra.io/scheduler", "events.k8s.io reportingController")
    expect(new.event_time is not None, "events.k8s.io eventTime lost")
    events.delete_namespaced_event("py-event", NS)
    ok("events.k8s.io/v1 Event created (eventTime as MicroTime) and deleted")


def check_dynamic(api: client.ApiClient) -> None:
    dyn = dynamic.DynamicClient(api)
    queues = dyn.resources.get(api_version="scheduling.volcano.sh/v1beta1", kind="Queue")
    expect(not queues.namespaced, "Queue discovered as namespaced")
    q = queues.create(body={"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "py-dyn"}, "spec": {"weight": 4}})
    expect_eq(q.spec.weight, 4, "weight through the DynamicClient")
    applied = queues.server_side_apply(
        body={"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "py-dyn"}, "spec": {"weight": 5}},
        field_manager="pyclient",
    )
    expect_eq(applied.spec.weight, 5, "weight after server-side apply")
    names = [i.metadata.name for i in queues.get().items]
    expect("py-dyn" in names, f"Queues through the DynamicClient: {names}")
    queues.delete(name="py-dyn")
    jobs = dyn.resources.get(api_version="batch.volcano.sh/v1alpha1", kind="Job")
    expect_eq(jobs.short_names, ["vcjob", "vj"], "short names through the DynamicClient")
    pods = dyn.resources.get(api_version="v1", kind="Pod")
    expect(pods.namespaced, "Pod discovered as cluster scoped")
    ok("kubernetes.dynamic.DynamicClient: discovery, create, server-side apply, list, delete of a custom resource")


def check_namespace(api: client.ApiClient) -> None:
    v1 = client.CoreV1Api(api)
    ns = "py-team"
    v1.create_namespace(client.V1Namespace(metadata=meta(ns)))
    expect_eq(v1.read_namespace(ns).status.phase, "Active", "phase of a new namespace")
    v1.create_namespaced_secret(ns, client.V1Secret(metadata=meta("pw"), string_data={"pw": "hunter2"}))
    secret = v1.read_namespaced_secret("pw", ns)
    expect_eq(secret.data, {"pw": "aHVudGVyMg=="}, "stringData stored as base64 data")
    v1.delete_namespace(ns)
    poll(lambda: gone(lambda: v1.read_namespace(ns)), bool, "namespace deleted")
    expect(gone(lambda: v1.read_namespaced_secret("pw", ns)), "the namespace's secret survived")
    ok("namespace created, holds a Secret (stringData), deleted with its content")


# ---------------------------------------------------------------------------------------------


def where(e: BaseException) -> str:
    """`at test_client.py:LINE` of the innermost frame of this script in the traceback."""
    frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename == __file__]
    return f"at {Path(__file__).name}:{frames[-1].lineno}" if frames else ""


def on_deadline(signum, frame):
    raise Deadline()


def main() -> int:
    global FAILED
    start = time.monotonic()
    server = Server(tephra_bin())
    signal.signal(signal.SIGALRM, on_deadline)
    signal.signal(signal.SIGTERM, lambda s, f: sys.exit(1))  # runs the finally below
    signal.alarm(DEADLINE_SECONDS)
    current = "start"
    try:
        server.start()
        cfg = client.Configuration(host=f"http://127.0.0.1:{server.port}")
        with client.ApiClient(cfg) as api:
            groups = [
                ("server and nodes", lambda: check_server_and_nodes(api, server)),
                ("ConfigMap", lambda: check_configmap(api)),
                ("Pod", lambda: check_pod(api)),
                ("selectors", lambda: check_selectors(api)),
                ("watch", lambda: check_watch(api)),
                ("CRDs", lambda: check_crds(api)),
                ("vcJob", lambda: check_vcjob(api)),
                ("Queue", lambda: check_queue(api)),
                ("binding", lambda: check_binding(api)),
                ("delete options", lambda: check_delete_options(api)),
                ("events", lambda: check_events(api)),
                ("DynamicClient", lambda: check_dynamic(api)),
                ("namespace", lambda: check_namespace(api)),
            ]
            for current, run in groups:
                try:
                    run()
                except CheckFailed as e:
                    FAILED += 1
                    print(f"FAIL - {current}: {e} {where(e)}", flush=True)
                except ApiException as e:
                    FAILED += 1
                    print(f"FAIL - {current}: unexpected ApiException {e.status} {e.reason} {where(e)}: {e.body}", flush=True)
                except Exception as e:  # e.g. the client cannot read a response
                    FAILED += 1
                    print(f"FAIL - {current}: {type(e).__name__} {where(e)}: {e}", flush=True)
    except CheckFailed as e:
        FAILED += 1
        print(f"FAIL - {current}: {e}", flush=True)
    except Deadline:
        FAILED += 1
        print(f"FAIL - {current}: the run exceeded its {DEADLINE_SECONDS}s deadline", flush=True)
    finally:
        signal.alarm(0)
        if FAILED:
            print("--- tephra apiserver log (tail)")
            print("\n".join(server.log_text().splitlines()[-30:]))
        server.stop()
    print(f"run time {time.monotonic() - start:.1f}s")
    print(f"python-client: {PASSED} passed, {FAILED} failed")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
