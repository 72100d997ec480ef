#!/usr/bin/env python3
"""The Ray Jobs REST API of a RayCluster's head, for RayJobs on kwok nodes.

KubeRay follows a RayJob through the Ray dashboard of its cluster's head
(http://<head service>.<namespace>.svc.cluster.local:8265/api/jobs/...). On kwok
the head is a pod without a process, so nothing answers there: this server is
run as the ray-operator's HTTP proxy (HTTP_PROXY; requests to 127.0.0.1 are not
proxied) and answers that API the way a head whose Ray job has run to the end
answers it: every job it is asked about has SUCCEEDED. What the RayJob does
around that (its cluster gang-scheduled whole, its submitter Job run to
completion) is the operator's and the cluster's own.

Listens on 127.0.0.1 at a free port and writes the port to the file named by
its only argument. Answers nothing but the jobs API of *.svc.cluster.local:8265.
"""

import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

JOBS = "/api/jobs/"


class Handler(BaseHTTPRequestHandler):
    def _target(self):
        url = urlsplit(self.path)
        host = url.hostname or ""
        if not host.endswith(".svc.cluster.local") or url.port != 8265:
            return None
        if not url.path.startswith(JOBS):
            return None
        return url.path[len(JOBS):]

    def _answer(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        job = self._target()
        if job is None:
            return self._answer(404, {"error": "not a Ray jobs API request"})
        if job == "":
            return self._answer(200, [])
        now = int(time.time() * 1000)
        self._answer(200, {"job_id": job, "submission_id": job, "status": "SUCCEEDED",
                           "message": "Job finished successfully.",
                           "start_time": now - 1000, "end_time": now})

    def do_POST(self):
        job = self._target()
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b"{}"
        if job is None:
            return self._answer(404, {"error": "not a Ray jobs API request"})
        if job == "":
            sid = json.loads(body or b"{}").get("submission_id") or "raysubmit"
            return self._answer(200, {"job_id": sid, "submission_id": sid})
        self._answer(200, {"stopped": True})

    def do_DELETE(self):
        job = self._target()
        self._answer(404 if job is None else 200, {})

    def log_message(self, *args):
        sys.stderr.write("jobs_api: " + (args[0] % args[1:]) + "\n")


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with open(sys.argv[1], "w") as f:
        f.write(str(server.server_address[1]))
    server.serve_forever()


if __name__ == "__main__":
    main()
