#!/usr/bin/env python3
"""Checks every PromQL expression of tephra's rules and dashboard against a live Prometheus
that scrapes tephra (tests/install/monitoring.sh sets that up).

What "checked" means, per kind of expression:
  recording rule   its expression returns at least one sample now, and so does the series it
                   records (Prometheus has evaluated the rule).
  alert            its expression is accepted by Prometheus (it parses and type-checks), and
                   every metric it reads exists: each vector selector `name{...}` matches at
                   least one series, or, when the selector picks values that a healthy run does
                   not produce (result="error", status=~"5.."), the metric itself has series.
                   Whether an alert fires is what promtool's unit tests check
                   (tests/install/rules-test.yaml), not this script.
  dashboard panel  each target's expression returns at least one sample now.
A sample counts only with a finite value (a quantile over no observations is NaN).
Metrics named with --pending are allowed to be absent (they are not exported yet); every
expression that needs them is listed as such, not passed. The checks are retried until all
pass or --timeout seconds have gone by (rates need two scrapes, rules an evaluation).
Exit status 0 when every expression passes, 1 otherwise, 2 on bad input.
Only the standard library and PyYAML are used."""

import argparse
import json
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import yaml

# Words that look like metric names in PromQL but are not.
KEYWORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or",
    "unless", "offset", "inf", "nan",
}


def query(base, expr):
    """Runs an instant query; returns (error or None, list of samples)."""
    url = base + "/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            body = json.load(r)
    except urllib.error.HTTPError as e:  # 400: bad expression, 422: cannot evaluate
        try:
            body = json.load(e)
        except ValueError:
            return f"HTTP {e.code}", []
        return body.get("error", f"HTTP {e.code}"), []
    except (urllib.error.URLError, OSError, ValueError) as e:
        return f"Prometheus unreachable: {e}", []
    if body.get("status") != "success":
        return body.get("error", "query failed"), []
    result = body["data"]["result"]
    return None, result if isinstance(result, list) else [result]


def selectors(expr):
    """The vector selectors of an expression: (metric name, full selector text)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)            # string contents
    text = re.sub(r"\{[^}]*\}", "{}", text)                    # label matchers
    text = re.sub(r"\[[^\]]*\]", "", text)                      # range durations
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)
    found = []
    # Positions in the stripped text map to the original only roughly, so matchers are taken
    # from the original expression by searching for the name followed by '{'.
    for m in re.finditer(r"(?<![\w:.$])([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\{)?", text):
        name = m.group(1)
        rest = text[m.end(1):].lstrip()
        if name.lower() in KEYWORDS or rest.startswith("("):
            continue
        sel = name
        om = re.search(re.escape(name) + r"\{((?:[^}\"]|\"(?:[^\"\\]|\\.)*\")*)\}", expr)
        if m.group(2) and om:
            sel = name + "{" + om.group(1) + "}"
        if (name, sel) not in found:
            found.append((name, sel))
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prometheus", required=True, help="base URL, e.g. http://127.0.0.1:9090")
    ap.add_argument("--rules", required=True, help="Prometheus rule file")
    ap.add_argument("--dashboard", required=True, help="Grafana dashboard JSON")
    ap.add_argument("--pending", action="append", default=[], help="metric allowed to be absent")
    ap.add_argument("--timeout", type=float, default=60)
    args = ap.parse_args()
    try:
        with open(args.rules) as f:
            groups = yaml.safe_load(f)["groups"]
        with open(args.dashboard) as f:
            dashboard = json.load(f)
    except (OSError, KeyError, TypeError, ValueError, yaml.YAMLError) as e:
        print(f"check_exprs: cannot read the inputs: {e}", file=sys.stderr)
        return 2

    checks = []  # (label, kind, expr, extra)
    for g in groups:
        for r in g["rules"]:
            if "record" in r:
                checks.append((f"record {r['record']}", "record", r["expr"], r["record"]))
            else:
                checks.append((f"alert {r['alert']}", "alert", r["expr"], None))
    panels = list(dashboard.get("panels", []))
    for p in list(panels):
        panels.extend(p.get("panels", []))
    for p in panels:
        for t in p.get("targets", []):
            checks.append((f"panel '{p['title']}' {t['refId']}", "panel", t["expr"], None))
    if not checks:
        print("check_exprs: no expressions found", file=sys.stderr)
        return 2

    def run(check):
        """(status, message); status is 'ok', 'pending' or 'fail'."""
        label, kind, expr, record = check
        needs = sorted({n for n, _ in selectors(expr) if n in args.pending})
        err, samples = query(args.prometheus, expr)
        if err:
            return "fail", f"Prometheus refuses the expression: {err}"
        if kind == "alert":
            notes = []
            for name, sel in selectors(expr):
                e1, s1 = query(args.prometheus, f"count({sel})")
                if e1:
                    return "fail", f"selector {sel}: {e1}"
                if s1:
                    continue
                _, s2 = query(args.prometheus, f'count({{__name__="{name}"}})')
                if s2:
                    notes.append(f"{sel}: no matching series now (metric present)")
                elif name in args.pending:
                    continue
                else:
                    return "fail", f"metric {name} has no series"
            if needs:
                return "pending", f"parses; needs {', '.join(needs)} (not exported yet)"
            return "ok", "parses; series exist" + (f" ({'; '.join(notes)})" if notes else "")
        if not samples:
            if needs:
                return "pending", f"no data; needs {', '.join(needs)} (not exported yet)"
            return "fail", "no data"
        finite = [x for x in samples if x.get("value", [0, "NaN"])[1] not in ("NaN", "+Inf", "-Inf")]
        if not finite:
            return "fail", f"{len(samples)} series, none with a finite value"
        if kind == "record":
            _, recorded = query(args.prometheus, record)
            if not recorded:
                return "fail", f"{len(samples)} samples, but the recorded series {record} is absent"
        return "ok", f"{len(samples)} series"

    deadline = time.monotonic() + args.timeout
    while True:
        results = [(c, *run(c)) for c in checks]
        failed = [r for r in results if r[1] == "fail"]
        if not failed or time.monotonic() > deadline:
            break
        time.sleep(2)
    for (label, _, expr, _), status, msg in results:
        print(f"{status:7} {label}: {msg}")
    counts = {s: sum(1 for r in results if r[1] == s) for s in ("ok", "pending", "fail")}
    print(f"check_exprs: {len(results)} expressions: {counts['ok']} ok, "
          f"{counts['pending']} waiting for metrics not exported yet, {counts['fail']} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
