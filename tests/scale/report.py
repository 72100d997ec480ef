"""The scale harness's tables: one per workload, the targets side by side.

Usage: report.py OUT TARGET...   (OUT as tests/scale/run.sh leaves it: OUT/TARGET/{cluster,
existing,cold,gang,stream,faults} of key=value lines, and /metrics snapshots per workload)

Exits 1 when a check failed: a target's gang case or stream not DONE, or a fault run with a
partial gang, a lost or duplicated pod, or a job not Completed.
"""

import os
import sys

TARGET_PROCS = {"volcano": ("vc-scheduler", "vc-controller-manager", "vc-webhook-manager"),
                "tephra": ("tephra", "kube-scheduler"), "floor": ()}


def load(path):
    """key=value lines; `proc` lines (NAME CPU_S PEAK_MIB RSS_MIB FILE_MIB) gathered apart."""
    if not os.path.exists(path):
        return None
    r = {"proc": {}}
    for line in open(path):
        key, _, val = line.rstrip("\n").partition("=")
        if key == "proc":
            name, *rest = val.split()
            r["proc"][name] = rest
        elif key:
            r[key] = val
    return r


def metrics(path):
    series = {}
    if os.path.exists(path):
        for line in open(path):
            if line.startswith("#") or not line.strip():
                continue
            k, _, v = line.rstrip("\n").rpartition(" ")
            try:
                series[k] = float(v)
            except ValueError:
                pass
    return series


def histogram_quantile(series, name, labels, q):
    """The q quantile of a cumulative histogram, as Prometheus' histogram_quantile: linear
    within the bucket it falls in. None without observations."""
    buckets = []
    for k, v in series.items():
        if k.startswith(name + "_bucket{") and labels in k:
            le = k.split('le="', 1)[1].split('"', 1)[0]
            buckets.append((float("inf") if le == "+Inf" else float(le), v))
    buckets.sort()
    if not buckets or buckets[-1][1] == 0:
        return None
    rank = q * buckets[-1][1]
    prev_le, prev_n = 0.0, 0.0
    for le, n in buckets:
        if n >= rank:
            if le == float("inf"):
                return prev_le
            return prev_le + (le - prev_le) * ((rank - prev_n) / (n - prev_n) if n > prev_n else 1)
        prev_le, prev_n = le, n
    return None


def mean(series, name):
    total = sum(v for k, v in series.items() if k.startswith(name + "_sum"))
    count = sum(v for k, v in series.items() if k.startswith(name + "_count"))
    return (total / count, int(count)) if count else (None, 0)


def secs(r, key):
    v = (r or {}).get(key, "")
    return f"{float(v):.1f} s" if v not in ("", "-") else "-"


def proc_sum(r, names, col):
    vals = [float(r["proc"][n][col]) for n in names if n in r["proc"] and r["proc"][n][col] not in ("-", "exited")]
    return sum(vals) if vals else None


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def table(title, rows, targets, results):
    shown = [t for t in targets if results.get(t)]
    if not shown:
        return
    print(f"== {title}")
    w = 34
    print(f"{'':{w}}" + "".join(f"{t:>24}" for t in shown))
    for label, fn in rows:
        print(f"{label:{w}}" + "".join(f"{fn(results[t], t):>24}" for t in shown))
    print()


def main():
    out, targets = sys.argv[1], sys.argv[2:]
    failed = []
    res = {w: {t: load(os.path.join(out, t, w)) for t in targets}
           for w in ("cluster", "existing", "cold", "gang", "stream", "faults")}
    first = next((r for r in res["cluster"].values() if r), None)
    if first:
        print(f"== the cluster: {first['nodes']} kwok nodes x 32 cpu, {first['existing']} existing running pods")
    table("loading the existing pods (straight into the API; kwok starts them)", [
        ("created in", lambda r, t: secs(r, "existing_created_s")),
        ("creates/s", lambda r, t: r.get("existing_create_rate", "-")),
        ("all running after", lambda r, t: secs(r, "existing_running_s")),
    ], targets, res["existing"])

    table("(a) cold start: a pending gang of 8, the target started against the loaded cluster", [
        ("caches synced", lambda r, t: secs(r, "ready_s")),
        ("first pod bound", lambda r, t: secs(r, "first_bind_s")),
        ("gang bound", lambda r, t: secs(r, "all_bound_s")),
    ], targets, res["cold"])

    floor_rate = float((res["gang"].get("floor") or {}).get("rate") or 0) or None
    floor_all = float((res["gang"].get("floor") or {}).get("all_bound_s") or 0) or None

    def gang_extra(t):
        m = metrics(os.path.join(out, t, "metrics-gang", "tephra.metrics"))
        if t == "volcano":
            m = metrics(os.path.join(out, t, "metrics-gang", "vc-scheduler.metrics"))
        return m

    def filter_p99(r, t):
        if t != "tephra":
            return "-"
        p = histogram_quantile(gang_extra(t), "tephra_extender_request_duration_seconds", 'verb="filter"', 0.99)
        return fmt(p and p * 1000, ".2f") + " ms"

    def session(r, t):
        if t == "floor":
            return "-"
        ms, n = mean(gang_extra(t), "volcano_e2e_scheduling_latency_milliseconds")
        return f"{fmt(ms, '.1f')} ms x {n}"

    g = res["gang"]
    first_gang = next((r for r in g.values() if r), None)
    if first_gang:
        shape = f"{first['gang_jobs']} vcJobs x {first['gang_replicas']} pods" if first else f"{first_gang['total']} pods"
        table(f"(b) the gang case: {shape}, all at once (floor: the same pods created and bound by a "
              "client that decides nothing)", [
            ("result", lambda r, t: f"{r.get('result')} {r.get('bound')}/{r.get('total')}"),
            ("all created", lambda r, t: secs(r, "created_s")),
            ("first bound", lambda r, t: secs(r, "first_bound_s")),
            ("all bound", lambda r, t: secs(r, "all_bound_s")),
            ("pods/s", lambda r, t: r.get("rate", "-")),
            ("time to all bound / floor's", lambda r, t: fmt(float(r["all_bound_s"]) / floor_all, ".2f") + "x"
             if r.get("all_bound_s") and floor_all else "-"),
            ("CPU s, target", lambda r, t: fmt(proc_sum(r, TARGET_PROCS[t], 0), ".1f")),
            ("peak RSS MiB, target", lambda r, t: fmt(proc_sum(r, TARGET_PROCS[t], 1), ".0f")),
            ("CPU s, kube-apiserver", lambda r, t: fmt(proc_sum(r, ("kube-apiserver",), 0), ".1f")),
            ("peak RSS MiB, kube-apiserver", lambda r, t: fmt(proc_sum(r, ("kube-apiserver",), 1), ".0f")),
            ("CPU s, etcd", lambda r, t: fmt(proc_sum(r, ("etcd",), 0), ".1f")),
            ("extender filter p99", filter_p99),
            ("scheduling session, mean", session),
            ("load average start / end", lambda r, t: f"{r.get('load_start', '-').split()[0]} / {r.get('load_end', '-').split()[0]}"),
        ], targets, g)
        for t in targets:
            if t != "floor" and g.get(t) and g[t].get("result") != "DONE":
                failed.append(f"{t}: gang case {g[t].get('result')}")
        # Per process, for reading the sums.
        for t in targets:
            r = g.get(t)
            if r:
                print("  " + t + ": " + "; ".join(f"{n} {float(v[0]):.1f} CPU s, {float(v[1]):.0f} MiB peak"
                                                  for n, v in r["proc"].items() if v[0] != "exited"))
        print()

    def wait(r, key):
        v = r.get(key)
        if not v:
            return "-"
        p = v.split()
        return f"{float(p[1]):.1f} / {float(p[3]):.1f} s"

    def queue_spread(r, t):
        p99s = [float(v.split()[3]) for k, v in r.items() if k.startswith("wait_q")]
        return f"{min(p99s):.1f}-{max(p99s):.1f} s" if p99s else "-"

    for name, label in (("stream", "(c) the mixed stream: gangs of 2/4/8 in 10 queues"),
                        ("faults", "(d) the stream with faults")):
        s = res[name]
        some = next((r for r in s.values() if r), None)
        if not some:
            continue
        rows = [
            ("arrivals", lambda r, t: f"{r.get('rate')}/s for {r.get('seconds')} s"),
            ("vcJobs submitted / started", lambda r, t: f"{r.get('submitted', '-')} / {r.get('started', '-')}"),
            ("Completed", lambda r, t: r.get("completed") or "0"),
            ("time in queue p50 / p99", lambda r, t: wait(r, "wait_all")),
            ("p99 per queue, lowest-highest", queue_spread),
            ("pool cpu held, mean", lambda r, t: f"{r.get('util_pct', '-')} %"),
            ("partial gangs", lambda r, t: r.get("partial_gangs", "-")),
            ("pods lost / duplicated", lambda r, t: f"{r.get('pods_lost', '-')} / {r.get('pods_duplicated', '-')}"),
        ]
        if name == "stream":
            rows += [
                ("CPU s, target", lambda r, t: fmt(proc_sum(r, TARGET_PROCS[t], 0), ".1f")),
                ("peak RSS MiB, target", lambda r, t: fmt(proc_sum(r, TARGET_PROCS[t], 1), ".0f")),
                ("CPU s, kube-apiserver", lambda r, t: fmt(proc_sum(r, ("kube-apiserver",), 0), ".1f")),
            ]
        rows.append(("load average start / end",
                     lambda r, t: f"{r.get('load_start', '-').split()[0]} / {r.get('load_end', '-').split()[0]}"))
        table(label, rows, targets, s)
        for t in targets:
            r = s.get(t)
            if not r:
                continue
            for k in sorted(k for k in r if k.startswith("fault_")):
                print(f"  {t} {k}: {r[k]}")
            if r.get("partial_names"):
                print(f"  {t}: partial gangs: {r['partial_names']}")
            bad = []
            if int(r.get("submitted") or 0) == 0 or r.get("completed") != r.get("submitted"):
                bad.append(f"{r.get('completed') or 0} of {r.get('submitted')} Completed ({r.get('phases')})")
            for key in ("partial_gangs", "pods_lost", "pods_duplicated"):
                if r.get(key, "0") != "0":
                    bad.append(f"{key} {r[key]}")
            if bad:
                failed.append(f"{t} {name}: " + ", ".join(bad))
        print()
    print(f"results, pod events, logs and /metrics: {out}")
    for f in failed:
        print(f"FAILED {f}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
