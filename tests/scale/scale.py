"""The scale harness's own client and arithmetic (tests/scale/run.sh calls it).

Standard library only. Subcommands:

  existing KUBECONFIG COUNT NODE_FIRST NODE_LAST
      COUNT running pods in namespace scale-existing, each created with spec.nodeName set
      (straight into the API, no scheduler), round-robin over kwok-node-NODE_FIRST ..
      kwok-node-NODE_LAST; waits until kwok has started them all. Prints key=value lines.
  floor KUBECONFIG JOBS REPLICAS NODE_FIRST NODE_LAST
      The floor: the gang case's JOBS x REPLICAS pods created and bound (the binding
      subresource, round-robin over the nodes) by a client that decides nothing, as fast as
      the API server takes them. Prints key=value lines.
  stream KUBECONFIG NAMESPACE QUEUES RATE SECONDS JOBS_OUT PREFIX
      vcJobs arriving at RATE a second for SECONDS, round-robin over the QUEUES (comma
      separated); each a gang of 2, 4 or 8 pods (cycling; minAvailable = replicas) of 1 cpu
      running `sleep 20`, on the nodes labelled scale.tephra.test/pool=stream. A create the
      API refuses (a fault) is retried until it is taken or the stream's time plus 120 s is up.
      One line per vcJob in JOBS_OUT: "NAME QUEUE SIZE CREATED_AT".
  stream-report EVENTS JOBS_FILE POOL_CPU T0 WIN_START WIN_END
      From a `podwatch.py ... full` event file and the stream's JOBS_FILE: time in queue per
      queue (creation to the gang's last pod bound) p50/p99, mean cpu held in the pool over
      the window, gangs partially bound (some but not all of a gang's pods bound for more
      than PARTIAL_GRACE s, or at the end), pods lost (a job with more pod lives than
      replicas) and duplicated (two pods of one job alive under one name). key=value lines.
  jobs KUBECONFIG NAMESPACE
      How many vcJobs of NAMESPACE are in each phase: "PHASE COUNT" lines.
  proxy LISTEN_PORT BACKEND...
      A TCP proxy on 127.0.0.1:LISTEN_PORT standing in for the Services in front of
      tephra's replicas: each connection goes to the replica leading now (its /metrics
      says tephra_leader_is_leader 1), else to any replica that is ready. BACKEND is
      SERVE_PORT:METRICS_PORT. TLS passes through untouched.
"""

import http.client
import json
import math
import os
import select
import socket
import ssl
import sys
import threading
import time
import urllib.parse

# A gang counts as partial once some but not all of its pods have been bound this long: a
# gang-atomic bind writes its pods one API call after another, so a gang is partial for the
# milliseconds between its first and last bind, and for a few seconds when a fault cuts the
# writes off and the next leader finishes them.
PARTIAL_GRACE = 30.0


# The kubeconfig reader of the pod watch beside the Volcano benchmarks: one reader for both.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "volcano-e2e"))
from podwatch import kubeconfig  # noqa: E402


class Api:
    """One keep-alive HTTPS connection to the API server (one per thread)."""

    def __init__(self, cfg):
        self.server, ca, token = kubeconfig(cfg)
        self.ctx = ssl.create_default_context(cafile=ca)
        self.headers = {"Authorization": f"Bearer {token}", "Accept": "application/json",
                        "Content-Type": "application/json"}
        self.conn = None

    def call(self, method, path, body=None, timeout=30.0):
        """(status, parsed body); status 0 when the connection failed."""
        data = json.dumps(body).encode() if body is not None else None
        for attempt in range(2):
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPSConnection(self.server.hostname, self.server.port,
                                                            context=self.ctx, timeout=timeout)
                self.conn.request(method, path, body=data, headers=self.headers)
                resp = self.conn.getresponse()
                raw = resp.read()
                try:
                    parsed = json.loads(raw) if raw else {}
                except ValueError:
                    parsed = {"message": raw[:200].decode(errors="replace")}
                return resp.status, parsed
            except (OSError, http.client.HTTPException) as err:
                self.conn = None
                if attempt == 1:
                    return 0, {"message": str(err)}
        return 0, {}


def ensure_namespace(api, name):
    status, body = api.call("POST", "/api/v1/namespaces", {"metadata": {"name": name}})
    if status not in (201, 409):
        sys.exit(f"scale.py: creating namespace {name}: {status} {body.get('message')}")
    # Pods need the namespace's default service account, which a controller makes.
    for _ in range(120):
        if api.call("GET", f"/api/v1/namespaces/{name}/serviceaccounts/default")[0] == 200:
            return
        time.sleep(0.5)
    sys.exit(f"scale.py: namespace {name} got no default service account in 60 s")


KWOK_TOLERATION = {"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}


def pod(name, namespace, labels, cpu, node=None, scheduler="default-scheduler"):
    spec = {"schedulerName": scheduler, "tolerations": [KWOK_TOLERATION],
            "containers": [{"name": "c", "image": "busybox:1.36",
                            "resources": {"requests": {"cpu": cpu, "memory": "128Mi"}}}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": labels}, "spec": spec}


def parallel(count, threads, work):
    """Runs work(api_index, i) for i in range(count) over `threads` threads; returns the
    number of failures."""
    failures = [0] * threads

    def run(w):
        for i in range(w, count, threads):
            if not work(w, i):
                failures[w] += 1

    ts = [threading.Thread(target=run, args=(w,)) for w in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return sum(failures)


def retrying(api, method, path, body, deadline):
    """The call, retried on connection failures, 429 and 5xx until it answers or deadline
    passes; 409 (already there, from a retry whose first answer was lost) counts as done."""
    while True:
        status, answer = api.call(method, path, body)
        if status in (200, 201, 409):
            return True
        if status not in (0, 429) and status < 500:
            print(f"scale.py: {method} {path}: {status} {answer.get('message')}", file=sys.stderr)
            return False
        if time.time() > deadline:
            return False
        time.sleep(0.2)


def cmd_existing(cfg, count, first, last, threads=8):
    count, first, last = int(count), int(first), int(last)
    apis = [Api(cfg) for _ in range(threads)]
    ns = "scale-existing"
    ensure_namespace(apis[0], ns)
    span = last - first + 1
    labels = {"scale.tephra.test/role": "existing"}
    deadline = time.time() + 3600
    t0 = time.time()

    def create(w, i):
        body = pod(f"ex-{i:06d}", ns, labels, "100m", node=f"kwok-node-{first + i % span}")
        return retrying(apis[w], "POST", f"/api/v1/namespaces/{ns}/pods", body, deadline)

    failed = parallel(count, threads, create)
    created = time.time() - t0
    print(f"existing_created_s={created:.1f}")
    print(f"existing_create_rate={count / created:.0f}")
    if failed:
        sys.exit(f"scale.py: {failed} of {count} existing pods could not be created")
    # kwok starts them; wait until none is Pending (a LIST with a field selector, limit 1).
    # With a limit the API server reads every pod from etcd to find one that matches: more
    # than 30 s at 150,000 pods, so this client waits up to 5 minutes for each answer.
    query = urllib.parse.urlencode({"fieldSelector": "status.phase=Pending", "limit": "1"})
    waiter = Api(cfg)
    while time.time() - t0 < 3600 + created:
        status, body = waiter.call("GET", f"/api/v1/namespaces/{ns}/pods?{query}", timeout=300.0)
        if status == 200 and not body.get("items"):
            print(f"existing_running_s={time.time() - t0:.1f}")
            return
        time.sleep(1)
    sys.exit("scale.py: kwok had not started every existing pod after an hour")


def cmd_floor(cfg, jobs, replicas, first, last, threads=8):
    jobs, replicas, first, last = int(jobs), int(replicas), int(first), int(last)
    apis = [Api(cfg) for _ in range(threads)]
    ns = "scale-gang"
    ensure_namespace(apis[0], ns)
    span, total = last - first + 1, jobs * replicas
    deadline = time.time() + 3600
    created_at, bound_at = [0.0] * total, [0.0] * total
    t0 = time.time()

    def create_and_bind(w, i):
        name = f"floor-{i // replicas:03d}-{i % replicas:03d}"
        # A scheduler name nobody serves: only this client places the pods.
        body = pod(name, ns, {"scale.tephra.test/role": "floor"}, "1", scheduler="scale-floor")
        if not retrying(apis[w], "POST", f"/api/v1/namespaces/{ns}/pods", body, deadline):
            return False
        created_at[i] = time.time()
        binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
                   "target": {"apiVersion": "v1", "kind": "Node", "name": f"kwok-node-{first + i % span}"}}
        if not retrying(apis[w], "POST", f"/api/v1/namespaces/{ns}/pods/{name}/binding", binding, deadline):
            return False
        bound_at[i] = time.time()
        return True

    failed = parallel(total, threads, create_and_bind)
    done = [b for b in bound_at if b]
    print(f"total={total}")
    print(f"bound={len(done)}")
    print(f"result={'DONE' if not failed else 'NOT DONE'}")
    if created_at and all(created_at):
        print(f"created_s={max(created_at) - t0:.3f}")
    if done:
        print(f"first_bound_s={min(done) - t0:.3f}")
    if len(done) == total:
        print(f"all_bound_s={max(done) - t0:.3f}")
        print(f"rate={total / (max(done) - t0):.1f}")


def vcjob(name, namespace, queue, size, sleep_s):
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": {"scale.tephra.test/role": "stream"}},
        "spec": {
            "schedulerName": "volcano", "minAvailable": size, "queue": queue,
            "tasks": [{
                "name": "w", "replicas": size,
                "template": {
                    "metadata": {"labels": {"scale.tephra.test/role": "stream"}},
                    "spec": {
                        "schedulerName": "volcano", "restartPolicy": "Never",
                        "nodeSelector": {"scale.tephra.test/pool": "stream"},
                        "tolerations": [KWOK_TOLERATION],
                        "containers": [{
                            "name": "main", "image": "busybox:1.36",
                            "command": ["/bin/sh", "-c", f"sleep {sleep_s}"],
                            "resources": {"requests": {"cpu": "1", "memory": "1Gi"},
                                          "limits": {"cpu": "1", "memory": "1Gi"}}}]}}}]}}


STREAM_SIZES = (2, 4, 8)
STREAM_SLEEP_S = 20


def cmd_stream(cfg, namespace, queues, rate, seconds, jobs_out, prefix, threads=4):
    queues, rate, seconds = queues.split(","), float(rate), float(seconds)
    count = int(rate * seconds)
    apis = [Api(cfg) for _ in range(threads)]
    path = f"/apis/batch.volcano.sh/v1alpha1/namespaces/{namespace}/jobs"
    out = open(jobs_out, "a", encoding="utf-8", buffering=1)
    lock = threading.Lock()
    t0 = time.time()
    deadline = t0 + seconds + 120

    def submit(w, i):
        # Steady arrivals: job i is due at t0 + i / rate, whatever came before it.
        due = t0 + i / rate
        wait = due - time.time()
        if wait > 0:
            time.sleep(wait)
        name, queue, size = f"{prefix}-{i:05d}", queues[i % len(queues)], STREAM_SIZES[i % len(STREAM_SIZES)]
        if not retrying(apis[w], "POST", path, vcjob(name, namespace, queue, size, STREAM_SLEEP_S), deadline):
            return False
        with lock:
            out.write(f"{name} {queue} {size} {time.time():.6f}\n")
        return True

    failed = parallel(count, threads, submit)
    print(f"submitted={count - failed}")
    print(f"submit_failed={failed}")
    print(f"submit_s={time.time() - t0:.1f}")


def pct(values, p):
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(p / 100 * len(s)) - 1))]


def cmd_stream_report(events_path, jobs_path, pool_cpu, t0, win_start, win_end):
    pool_cpu, t0, win_start, win_end = float(pool_cpu), float(t0), float(win_start), float(win_end)
    jobs = {}
    for line in open(jobs_path):
        name, queue, size, created = line.split()
        jobs[name] = (queue, int(size), float(created))
    # Per pod life (uid): job, when first bound, when finished; per (job, name): lives.
    lives, names = {}, {}
    evs = []
    for line in open(events_path):
        parts = line.split()
        if len(parts) == 6:
            evs.append((float(parts[0]), parts[1], parts[2], parts[3], parts[4], parts[5]))
    evs.sort(key=lambda e: e[0])
    for stamp, name, node, phase, uid, job in evs:
        if job not in jobs:
            continue
        life = lives.setdefault(uid, {"job": job, "name": name, "bound": None, "end": None})
        names.setdefault((job, name), set()).add(uid)
        if node != "-" and life["bound"] is None:
            life["bound"] = stamp
        if phase in ("Succeeded", "Failed", "Deleted") and life["end"] is None:
            life["end"] = stamp
    by_job = {}
    for uid, life in lives.items():
        by_job.setdefault(life["job"], []).append(life)
    waits = {q: [] for q in sorted({q for q, _, _ in jobs.values()})}
    started = partial = lost = duplicated = 0
    partial_names = []
    end_of_events = evs[-1][0] if evs else t0
    for name, (queue, size, created) in jobs.items():
        mine = by_job.get(name, [])
        binds = sorted(l["bound"] for l in mine if l["bound"] is not None)
        if len(binds) >= size:
            started += 1
            waits[queue].append(binds[size - 1] - created)
            # Bound over longer than the grace: seen partial.
            if binds[size - 1] - binds[0] > PARTIAL_GRACE:
                partial += 1
                partial_names.append(name)
        elif binds and end_of_events - binds[0] > PARTIAL_GRACE:
            partial += 1
            partial_names.append(name)
        # A pod the job had to make again: its first life was lost.
        if len(mine) > size:
            lost += len(mine) - size
    # Two lives of one pod name overlapping in time: a duplicate.
    for uids in names.values():
        spans = sorted((lives[u]["bound"] or 0, lives[u]["end"] or float("inf")) for u in uids)
        for (a0, a1), (b0, b1) in zip(spans, spans[1:]):
            if b0 and b0 < a1:
                duplicated += 1
    print(f"jobs={len(jobs)}")
    print(f"started={started}")
    print(f"partial_gangs={partial}")
    if partial_names:
        print(f"partial_names={','.join(sorted(partial_names)[:10])}")
    print(f"pods_lost={lost}")
    print(f"pods_duplicated={duplicated}")
    every = [w for ws in waits.values() for w in ws]
    for q, ws in list(waits.items()) + [("all", every)]:
        if ws:
            print(f"wait_{q}=p50 {pct(ws, 50):.2f} p99 {pct(ws, 99):.2f} n {len(ws)}")
    # Mean cpu held (pods bound and not finished) every second of the window.
    samples = []
    s = win_start
    held_events = []
    for life in lives.values():
        if life["bound"] is not None:
            held_events.append((life["bound"], 1))
            if life["end"] is not None:
                held_events.append((life["end"], -1))
    held_events.sort()
    held, i = 0, 0
    while s <= win_end:
        at = t0 + s
        while i < len(held_events) and held_events[i][0] <= at:
            held += held_events[i][1]
            i += 1
        samples.append(held)
        s += 1
    if samples:
        print(f"util_pct={sum(samples) / len(samples) / pool_cpu * 100:.1f}")


def cmd_jobs(cfg, namespace):
    api = Api(cfg)
    phases, cont = {}, ""
    while True:
        query = urllib.parse.urlencode({"limit": "500", **({"continue": cont} if cont else {})})
        status, body = api.call("GET", f"/apis/batch.volcano.sh/v1alpha1/namespaces/{namespace}/jobs?{query}")
        if status != 200:
            sys.exit(f"scale.py: listing vcJobs: {status} {body.get('message')}")
        for job in body.get("items", []):
            phase = (job.get("status") or {}).get("state", {}).get("phase") or "None"
            phases[phase] = phases.get(phase, 0) + 1
        cont = body.get("metadata", {}).get("continue", "")
        if not cont:
            break
    for phase, n in sorted(phases.items()):
        print(f"{phase} {n}")


def cmd_proxy(listen, *backends):
    pairs = [tuple(int(p) for p in b.split(":")) for b in backends]
    chosen = {"port": None}

    def probe(port, path):
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            c.request("GET", path)
            r = c.getresponse()
            return r.status, r.read().decode(errors="replace")
        except (OSError, http.client.HTTPException):
            return 0, ""

    def follow():
        while True:
            leader = ready = None
            for serve, metrics in pairs:
                status, text = probe(metrics, "/metrics")
                if status == 200 and "\ntephra_leader_is_leader 1" in text:
                    leader = serve
                if ready is None and probe(metrics, "/readyz")[0] == 200:
                    ready = serve
            chosen["port"] = leader or ready
            time.sleep(0.25)

    def pipe(a, b):
        try:
            while True:
                r, _, _ = select.select([a, b], [], [], 60)
                if not r:
                    break
                for s in r:
                    data = s.recv(65536)
                    if not data:
                        return
                    (b if s is a else a).sendall(data)
        except OSError:
            pass
        finally:
            a.close()
            b.close()

    threading.Thread(target=follow, daemon=True).start()
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", int(listen)))
    srv.listen(256)
    while True:
        client, _ = srv.accept()
        port = chosen["port"]
        if port is None:
            client.close()
            continue
        try:
            upstream = socket.create_connection(("127.0.0.1", port), timeout=2)
        except OSError:
            client.close()
            continue
        threading.Thread(target=pipe, args=(client, upstream), daemon=True).start()


COMMANDS = {"existing": cmd_existing, "floor": cmd_floor, "stream": cmd_stream,
            "stream-report": cmd_stream_report, "jobs": cmd_jobs, "proxy": cmd_proxy}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        sys.exit(__doc__)
    COMMANDS[sys.argv[1]](*sys.argv[2:])
