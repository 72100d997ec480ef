"""Pod watch for bench.sh: one line per pod event, "TIME NAME NODE", stamped
(time.time()) as the event arrives; NODE is empty until the pod is bound.
With a sixth argument `phase` (utilization.sh) each line is
"TIME NAME NODE PHASE", NODE `-` until bound, PHASE the pod's phase or
`Deleted` for a pod that is gone; with `full` (tests/scale) it is
"TIME NAME NODE PHASE UID JOB", JOB the pod's volcano.sh/job-name label or `-`.

Usage: podwatch.py KUBECONFIG NAMESPACE LABEL_SELECTOR OUT_FILE SECONDS [phase|full]

Lists, then watches from the list's resourceVersion; when the API server ends
the watch (its timeout, or a consumer it found too slow), it lists and watches
again, so no pod is missed: a pod first seen bound in such a list is stamped
with that list's time (later than its real bind, never earlier). Stops after
SECONDS. Reads only the kubeconfig's first cluster and a token or client
certificate of its first user (what tests/cluster/up.sh writes). Standard
library only.
"""

import json
import os
import ssl
import sys
import time
import http.client
import urllib.parse


def kubeconfig(path):
    """Server host, port, CA file and token from the simple kubeconfig of up.sh."""
    server = ca = token = None
    for raw in open(path, encoding="utf-8"):
        line = raw.strip()
        key, _, value = line.partition(":")
        value = value.strip().strip('"')
        if key == "server" and server is None:
            server = urllib.parse.urlsplit(value)
        elif key == "certificate-authority" and ca is None:
            ca = value
        elif key == "token" and token is None:
            token = value
    if server is None or token is None:
        sys.exit(f"podwatch: no server or token in {path}")
    return server, ca, token


def main():
    cfg, namespace, selector, out_path, seconds = sys.argv[1:6]
    mode = (sys.argv[6:7] or [""])[0]
    with_phase = mode in ("phase", "full")
    server, ca, token = kubeconfig(cfg)
    ctx = ssl.create_default_context(cafile=ca) if ca else ssl._create_unverified_context()
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
    base = f"/api/v1/namespaces/{namespace}/pods"
    deadline = time.time() + float(seconds)
    out = open(out_path, "a", encoding="utf-8", buffering=1)

    def emit(pod, stamp, deleted=False):
        name = pod.get("metadata", {}).get("name", "")
        node = pod.get("spec", {}).get("nodeName") or ""
        if with_phase:
            phase = "Deleted" if deleted else pod.get("status", {}).get("phase") or "-"
            line = f"{stamp:.6f} {name} {node or '-'} {phase}"
            if mode == "full":
                meta = pod.get("metadata", {})
                job = (meta.get("labels") or {}).get("volcano.sh/job-name") or "-"
                line += f" {meta.get('uid') or '-'} {job}"
            out.write(line + "\n")
        elif not deleted:
            out.write(f"{stamp:.6f} {name} {node}\n")

    while time.time() < deadline:
        try:
            conn = http.client.HTTPSConnection(server.hostname, server.port, context=ctx,
                                               timeout=max(5.0, deadline - time.time()))
            query = urllib.parse.urlencode({"labelSelector": selector})
            conn.request("GET", f"{base}?{query}", headers=headers)
            resp = conn.getresponse()
            body = resp.read()
            if resp.status != 200:
                print(f"podwatch: list answered {resp.status}: {body[:200]!r}", file=sys.stderr)
                time.sleep(1)
                continue
            listed = json.loads(body)
            stamp = time.time()
            for pod in listed.get("items", []):
                emit(pod, stamp)
            rv = listed.get("metadata", {}).get("resourceVersion", "")
            query = urllib.parse.urlencode({"labelSelector": selector, "watch": "1",
                                            "resourceVersion": rv,
                                            "timeoutSeconds": str(int(max(1, deadline - time.time())))})
            conn.request("GET", f"{base}?{query}", headers=headers)
            resp = conn.getresponse()
            if resp.status != 200:
                print(f"podwatch: watch answered {resp.status}", file=sys.stderr)
                time.sleep(1)
                continue
            for line in resp:
                event = json.loads(line)
                if event.get("type") in ("ADDED", "MODIFIED"):
                    emit(event.get("object", {}), time.time())
                elif event.get("type") == "DELETED":
                    emit(event.get("object", {}), time.time(), deleted=True)
                elif event.get("type") == "ERROR":
                    print(f"podwatch: watch error {event.get('object')}", file=sys.stderr)
                    break
            print(f"podwatch: watch ended at {time.time():.3f}, listing again", file=sys.stderr)
        except (OSError, http.client.HTTPException, ValueError) as err:
            print(f"podwatch: {err}; retrying", file=sys.stderr)
            time.sleep(1)


if __name__ == "__main__":
    main()
