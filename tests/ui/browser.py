#!/usr/bin/env python3
"""The web view as a person uses it: `tephra serve --embedded` runs a queue with a job that
fills the cluster and a gang that cannot be placed; headless Chromium (Debian's chromium,
driven through chromedriver's WebDriver protocol) opens /ui, reads the queue table and the
gang's reason, follows the link to a gang's pods, opens the what-if page, pastes a vcJob,
presses Predict and reads the answer. Each page is kept as a PNG screenshot, checked not to
be blank.

Usage: tests/ui/browser.py OUT_DIR
Writes OUT_DIR/overview.png, OUT_DIR/gang.png, OUT_DIR/whatif.png.
Environment: TEPHRA_BIN (default: target/debug/tephra, built when missing), CHROMIUM and
CHROMEDRIVER (default: found on PATH; Debian's packages chromium and chromium-driver).
Servers listen on 127.0.0.1 only; every wait is bounded.
"""

import base64
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "docs"))
from screenshot import colours, png_pixels  # noqa: E402  (the book check's PNG reader)

WIDTH, HEIGHT = 1280, 900
# The key of an element reference in WebDriver's answers (the W3C specification's constant).
ELEMENT = "element-6066-11e4-a52e-4f735466cecf"
PASTED = """apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: wide
spec:
  schedulerName: volcano
  queue: research
  minAvailable: 1
  tasks:
  - name: worker
    replicas: 1
    template:
      metadata:
        annotations:
          simulation.tephra.io/run-seconds: "60"
      spec:
        restartPolicy: Never
        containers:
        - name: c
          image: busybox
          resources:
            requests:
              cpu: "8"
"""


class Failed(Exception):
    pass


def free_ports(n):
    """n distinct free loopback ports; each socket is held until all are picked, since a port
    released before the next pick may be handed out again."""
    held = []
    try:
        for _ in range(n):
            s = socket.socket()
            held.append(s)
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in held]
    finally:
        for s in held:
            s.close()


def http(method, url, body=None, timeout=30):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            text = r.read().decode()
            return r.status, (json.loads(text) if text.strip().startswith(("{", "[")) else text)
    except urllib.error.HTTPError as e:
        text = e.read().decode(errors="replace")
        try:
            return e.code, json.loads(text)
        except ValueError:
            return e.code, text
    except (urllib.error.URLError, ConnectionError, TimeoutError) as e:
        return 0, str(e)


def until(seconds, what, probe, every=0.25):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(every)
    raise Failed(f"timed out after {seconds}s waiting for {what}")


def vcjob(name, replicas, cpu, run_seconds):
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"schedulerName": "volcano", "queue": "research", "minAvailable": replicas,
                 "tasks": [{"name": "worker", "replicas": replicas, "template": {
                     "metadata": {"annotations": {"simulation.tephra.io/run-seconds": str(run_seconds)}},
                     "spec": {"restartPolicy": "Never", "containers": [{
                         "name": "c", "image": "busybox",
                         "env": [{"name": "API_TOKEN", "value": "do-not-show-me"}],
                         "resources": {"requests": {"cpu": cpu}}}]}}}]},
    }


class WebDriver:
    """The few WebDriver commands this test needs, over chromedriver's HTTP endpoint."""

    def __init__(self, url, chromium, profile):
        self.url = url
        caps = {"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": chromium, "args": [
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--hide-scrollbars", f"--user-data-dir={profile}", f"--window-size={WIDTH},{HEIGHT}"]},
        }}}
        status, body = http("POST", f"{url}/session", caps, timeout=90)
        if status != 200:
            raise Failed(f"chromedriver could not start Chromium: {body}")
        self.session = f"{url}/session/{body['value']['sessionId']}"

    def call(self, method, path, body=None):
        status, answer = http(method, self.session + path, body, timeout=60)
        if status != 200:
            raise Failed(f"WebDriver {method} {path}: {answer}")
        return answer["value"]

    def open(self, url):
        self.call("POST", "/url", {"url": url})

    def find(self, css):
        found = self.call("POST", "/elements", {"using": "css selector", "value": css})
        return [e[ELEMENT] for e in found]

    def one(self, css):
        found = self.find(css)
        if not found:
            raise Failed(f"no element {css!r} on {self.call('GET', '/url')}")
        return found[0]

    def text(self, element):
        return self.call("GET", f"/element/{element}/text")

    def click(self, element):
        self.call("POST", f"/element/{element}/click", {})

    def type(self, element, text):
        self.call("POST", f"/element/{element}/clear", {})
        self.call("POST", f"/element/{element}/value", {"text": text})

    def screenshot(self, path):
        with open(path, "wb") as f:
            f.write(base64.b64decode(self.call("GET", "/screenshot")))

    def quit(self):
        http("DELETE", self.session, timeout=30)


def check_picture(path):
    """Problems of a screenshot that a person would call blank or broken."""
    width, height, rows, bpp = png_pixels(path)
    seen = colours(rows, bpp, 0, width)
    top = seen.most_common(1)[0][1] / sum(seen.values())
    problems = []
    if os.path.getsize(path) < 15_000:
        problems.append(f"only {os.path.getsize(path)} bytes")
    if len(seen) < 40:
        problems.append(f"{len(seen)} distinct colours: blank or nearly")
    if top > 0.97:
        problems.append(f"one colour covers {top:.0%}")
    return problems, f"{width}x{height}, {len(seen)} colours, commonest {top:.0%}"


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = os.path.abspath(sys.argv[1])
    os.makedirs(out, exist_ok=True)
    chromium = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    driver_bin = os.environ.get("CHROMEDRIVER") or shutil.which("chromedriver")
    if not chromium or not driver_bin:
        sys.exit("browser.py: needs chromium and chromedriver (apt-get install chromium chromium-driver)")
    tephra = os.environ.get("TEPHRA_BIN") or os.path.join(
        os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target"), "debug", "tephra")
    if not os.path.exists(tephra):
        subprocess.run(["cargo", "build", "--quiet", "--bin", "tephra"], cwd=ROOT, check=True)

    work = tempfile.mkdtemp(prefix="tephra-ui-")
    api_port, metrics_port, driver_port = free_ports(3)
    api, ui = f"http://127.0.0.1:{api_port}", f"http://127.0.0.1:{metrics_port}/ui"
    log = open(os.path.join(work, "tephra.log"), "w")
    serve = subprocess.Popen(
        [tephra, "serve", "--embedded", "--listen", "127.0.0.1:0",
         "--embedded-api-listen", f"127.0.0.1:{api_port}",
         "--metrics-listen", f"127.0.0.1:{metrics_port}"],
        stdout=log, stderr=subprocess.STDOUT)
    driver = subprocess.Popen([driver_bin, f"--port={driver_port}", "--allowed-ips=127.0.0.1"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    browser = None
    checks = []

    def check(name, ok, detail=""):
        checks.append((name, ok))
        print(f"{'ok' if ok else 'FAIL'} - {name}{': ' + detail if detail and not ok else ''}")

    try:
        until(60, "tephra to be ready",
              lambda: http("GET", f"http://127.0.0.1:{metrics_port}/readyz", timeout=5)[0] == 200)
        status, body = http("POST", f"{api}/apis/scheduling.volcano.sh/v1beta1/queues", {
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
            "metadata": {"name": "research"}, "spec": {"weight": 3, "reclaimable": True}})
        if status != 201:
            raise Failed(f"creating the queue: {status} {body}")
        # Three nodes of 8 cpu: busy takes 7 on each, so blocked (two pods of 6), submitted once
        # busy runs, must wait. (Submitted together, either may go first.)
        def submit(job):
            status, body = http("POST", f"{api}/apis/batch.volcano.sh/v1alpha1/namespaces/default/jobs", job)
            if status != 201:
                raise Failed(f"creating {job['metadata']['name']}: {status} {body}")

        submit(vcjob("busy", 3, "7", 600))

        def running_busy():
            _, pods = http("GET", f"{api}/api/v1/namespaces/default/pods?labelSelector=volcano.sh%2Fjob-name%3Dbusy")
            items = pods.get("items", []) if isinstance(pods, dict) else []
            running = [p for p in items if p.get("status", {}).get("phase") == "Running"]
            return {p["metadata"]["name"]: p["spec"]["nodeName"] for p in running} if len(running) == 3 else None

        busy_pods = until(60, "busy's three pods to run", running_busy)
        submit(vcjob("blocked", 2, "6", 30))

        def blocked_reason():
            _, pgs = http("GET", f"{api}/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups")
            for pg in pgs.get("items", []) if isinstance(pgs, dict) else []:
                if not any(o.get("name") == "blocked" for o in pg["metadata"].get("ownerReferences", [])):
                    continue
                for c in pg.get("status", {}).get("conditions", []):
                    if c.get("type") == "Unschedulable" and c.get("status") == "True" and c.get("message"):
                        return pg["metadata"]["name"], c["message"]
            return None

        blocked_pg, reason = until(60, "blocked's Unschedulable condition", blocked_reason)

        profile = os.path.join(work, "profile")
        until(30, "chromedriver", lambda: http("GET", f"http://127.0.0.1:{driver_port}/status", timeout=5)[0] == 200)
        browser = WebDriver(f"http://127.0.0.1:{driver_port}", chromium, profile)

        # The front page.
        browser.open(ui)
        queues = browser.text(browser.one("table#queues"))
        research = next((line for line in queues.splitlines() if line.startswith("research")), "")
        check("the queue table shows research with weight 3 and 21 cpu allocated",
              " 3 " in f" {research} " and "21 cpu" in research, research or queues)
        gangs = " ".join(browser.text(e) for e in browser.find("table.gangs"))
        check("blocked's gang is listed with the scheduler's reason", blocked_pg in gangs and reason in gangs,
              f"{blocked_pg!r}, {reason!r} not in {gangs!r}")
        page_text = browser.text(browser.one("body"))
        check("no pod environment on the page", "do-not-show-me" not in page_text)
        browser.screenshot(os.path.join(out, "overview.png"))

        # A gang's pods, by following its link as a person would.
        links = [e for e in browser.find("table.gangs a") if browser.text(e).startswith("default/busy-")]
        if not links:
            raise Failed("no link to busy's gang on the front page")
        browser.click(links[0])
        until(10, "the gang page", lambda: browser.find("table#pods") or None)
        pods = browser.text(browser.one("table#pods"))
        check("the gang page lists busy's three pods on their nodes",
              all(f"{p} worker Running {n}" in pods for p, n in busy_pods.items()), pods)
        browser.screenshot(os.path.join(out, "gang.png"))

        # What if: the header's link, the pasted vcJob, Predict.
        browser.click(next(e for e in browser.find("header a") if "What if" in browser.text(e)))
        until(10, "the what-if form", lambda: browser.find("textarea#jobs") or None)
        browser.type(browser.one("textarea#jobs"), PASTED)
        browser.click(browser.one("form button"))
        until(60, "the prediction", lambda: browser.find("table#prediction") or browser.find("#error") or None)
        if browser.find("#error"):
            raise Failed("what-if refused the pasted job: " + browser.text(browser.one("#error")))
        prediction = browser.text(browser.one("table#prediction"))
        wide = next((line for line in prediction.splitlines() if line.startswith("default/wide")), "")
        check("the pasted job is predicted to start when busy's pods end (in about 10 minutes)",
              " yes " in f" {wide} " and any(f" {m}m " in f" {wide} " for m in (8, 9, 10)), wide or prediction)
        status, _ = http("GET", f"{api}/apis/batch.volcano.sh/v1alpha1/namespaces/default/jobs/wide")
        check("what-if created nothing", status == 404, f"GET wide: {status}")
        browser.screenshot(os.path.join(out, "whatif.png"))

        for name in ("overview", "gang", "whatif"):
            problems, summary = check_picture(os.path.join(out, f"{name}.png"))
            check(f"{name}.png is a picture of the page ({summary})", not problems, "; ".join(problems))
    except Failed as e:
        check("the run", False, str(e))
    finally:
        if browser:
            browser.quit()
        for p in (driver, serve):
            p.terminate()
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
        log.close()
    failed = [n for n, ok in checks if not ok]
    print(f"web view in Chromium: {len(checks) - len(failed)} passed, {len(failed)} failed; screenshots in {out}")
    if failed:
        with open(os.path.join(work, "tephra.log")) as f:
            print("tephra's log (last 40 lines):\n" + "".join(f.readlines()[-40:]))
    shutil.rmtree(work, ignore_errors=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
