#!/usr/bin/env python3
"""Summarises one Ginkgo JSON report of a Volcano e2e suite.

Usage: report.py REPORT.json SUITE SKIP_FILE COUNTS_OUT SUITE_LOG DIFFERENCES_FILE TARGET

Prints `SUITE: N passed, M failed, K skipped`, then each failed spec with its
first assertion (message and location), then, against tephra, the failed specs
that differences.txt lists (known differences, with its reason and the
assertion, not counted as failed), then the skipped specs with the reason
skip.txt gives. Writes "N M K D" to COUNTS_OUT (D: known differences). A suite
that wrote no report (it crashed before the specs ran) counts as one failure,
with its log's tail.
"""
import json
import re
import sys


def reasons_of(path, suite):
    reasons = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            s, spec, reason = (p.strip() for p in line.split("|", 2))
            if s == suite:
                # As run.sh builds its -ginkgo.skip: the words in order.
                reasons[".*".join(re.escape(w) for w in spec.split())] = reason
    return reasons


def spec_name(r):
    return " ".join(list(r.get("ContainerHierarchyTexts") or []) + [r.get("LeafNodeText", "")]).strip()


def first_line(text, limit=300):
    text = (text or "").strip()
    line = text.splitlines()[0] if text else ""
    # Gomega's messages put the interesting part on the lines after "Expected".
    if line in ("Expected", "Unexpected error:") and len(text.splitlines()) > 1:
        line = " ".join(x.strip() for x in text.splitlines()[:4])
    return line[:limit]


def assertion(r):
    fl = r.get("Failure") or {}
    loc = fl.get("Location") or {}
    where = f"{loc.get('FileName', '?').split('/volcano.sh/')[-1]}:{loc.get('LineNumber', '?')}"
    return f"{first_line(fl.get('Message'))} ({where})"


def main():
    report, suite, skip_file, counts_out, log, diff_file, target = sys.argv[1:8]
    reasons = reasons_of(skip_file, suite)
    # Known differences apply to tephra only: against Volcano they are failures.
    differences = reasons_of(diff_file, suite) if target == "tephra" else {}
    try:
        with open(report, encoding="utf-8") as f:
            suites = json.load(f)
    except (OSError, ValueError) as e:
        print(f"{suite}: 0 passed, 1 failed, 0 skipped")
        print(f"  FAILED {suite}: no report ({e}); last lines of {log}:")
        try:
            with open(log, encoding="utf-8", errors="replace") as f:
                for line in f.readlines()[-15:]:
                    print("    " + line.rstrip())
        except OSError:
            pass
        with open(counts_out, "w") as f:
            f.write("0 1 0 0\n")
        return
    passed, failed, skipped = [], [], []
    for s in suites:
        for r in s.get("SpecReports") or []:
            state = r.get("State", "")
            if r.get("LeafNodeType") != "It":
                # A failing BeforeSuite/AfterSuite fails the suite: count it.
                if state not in ("passed", "skipped", ""):
                    failed.append(r)
                continue
            if state == "passed":
                passed.append(r)
            elif state in ("skipped", "pending"):
                skipped.append(r)
            else:
                failed.append(r)
    known = []
    for r in list(failed):
        why = next((w for p, w in differences.items() if re.search(p, spec_name(r))), None)
        if why is not None:
            failed.remove(r)
            known.append((r, why))
    print(
        f"{suite}: {len(passed)} passed, {len(failed)} failed, {len(skipped)} skipped"
        + (f" ({len(known)} known differences)" if known else "")
    )
    for r in failed:
        name = spec_name(r) or r.get("LeafNodeType", "?")
        print(f"  FAILED [{r.get('State')}] {name}")
        print(f"      {assertion(r)}")
    for r, why in known:
        print(f"  known difference: {spec_name(r)}: {why}")
        print(f"      {assertion(r)}")
    for r in skipped:
        reason = next(
            (why for pattern, why in reasons.items() if re.search(pattern, spec_name(r))),
            "skipped by the spec itself, or by VC_E2E_FOCUS/VC_E2E_SKIP",
        )
        print(f"  skipped {spec_name(r)}: {reason}")
    with open(counts_out, "w") as f:
        f.write(f"{len(passed)} {len(failed)} {len(skipped)} {len(known)}\n")


if __name__ == "__main__":
    main()
