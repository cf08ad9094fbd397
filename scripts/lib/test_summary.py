#!/usr/bin/env python3
"""The table scripts/test ends with: each stage's result, the tests its
runners said passed and failed (read from the stage's log, in each runner's
own words), and its time.

    python3 scripts/lib/test_summary.py LOGDIR TOTAL_SECONDS "STAGE STATUS SECONDS"...

Exits 1 when a stage failed.
"""
import os
import re
import sys

# What each runner prints about its tests: (pattern, which group counts passes, which failures).
RUNNERS = [
    # XCTest's last line, for the whole bundle: "Executed 249 tests, with 5 tests skipped and 0 failures".
    ("xctest", re.compile(r"Executed (\d+) tests?, with (?:(\d+) tests? skipped and )?(\d+) failures?"), None),
    # unittest: "Ran 13 tests in ..." and, on failure, "FAILED (failures=1, errors=2)".
    ("unittest", re.compile(r"^Ran (\d+) tests? in "), re.compile(r"^FAILED \((.*)\)")),
    # pytest's closing line: "==== 81 passed, 1 failed in 37.38s ====".
    ("pytest", re.compile(r"^=+ (.*\d+ (?:passed|failed|errors?).*) in [\d.]+s"), None),
    # node --test: "ℹ pass 43" / "ℹ fail 0".
    ("node", re.compile(r"^ℹ (pass|fail) (\d+)$"), None),
    # go test: one "ok" or "FAIL" line per package.
    ("go", re.compile(r"^(ok|FAIL)\s+\S+\s"), None),
    # JUnit's console launcher: "[ 57 tests successful ]", "[ 0 tests failed ]".
    ("junit", re.compile(r"\[\s+(\d+) tests (successful|failed)\s+\]"), None),
    # schemathesis: "12806 generated, 12806 passed".
    ("schemathesis", re.compile(r"^\s*(\d+) generated, (\d+) passed(?:, (\d+) failed)?"), None),
    # larder check's last line: "5 passed, 0 failed" (nothing before it).
    ("larder check", re.compile(r"^(\d+) passed, (\d+) failed$"), None),
]


def counts(text):
    """(passed, failed) as the runners in `text` report them."""
    passed = failed = 0
    lines = text.splitlines()
    # XCTest repeats its bundle total: the largest "Executed" line is the bundle's.
    executed = [m for m in (RUNNERS[0][1].search(l) for l in lines) if m]
    if executed:
        whole = max(executed, key=lambda m: int(m.group(1)))
        skipped, failures = int(whole.group(2) or 0), int(whole.group(3))
        passed += int(whole.group(1)) - skipped - failures
        failed += failures
    for line in lines:
        m = RUNNERS[1][1].search(line)
        if m:
            passed += int(m.group(1))
        m = RUNNERS[1][2].search(line)
        if m:
            bad = sum(int(n) for n in re.findall(r"(?:failures|errors)=(\d+)", m.group(1)))
            passed -= bad
            failed += bad
        m = RUNNERS[2][1].search(line)
        if m:
            for number, word in re.findall(r"(\d+) (passed|failed|errors?)", m.group(1)):
                if word == "passed":
                    passed += int(number)
                else:
                    failed += int(number)
        m = RUNNERS[3][1].search(line)
        if m:
            if m.group(1) == "pass":
                passed += int(m.group(2))
            else:
                failed += int(m.group(2))
        m = RUNNERS[4][1].search(line)
        if m:
            if m.group(1) == "ok":
                passed += 1
            else:
                failed += 1
        m = RUNNERS[5][1].search(line)
        if m:
            if m.group(2) == "successful":
                passed += int(m.group(1))
            else:
                failed += int(m.group(1))
        m = RUNNERS[6][1].search(line)
        if m:
            passed += int(m.group(2))
            failed += int(m.group(3) or 0)
        m = RUNNERS[7][1].search(line)
        if m:
            passed += int(m.group(1))
            failed += int(m.group(2))
    return passed, failed


def minutes(seconds):
    return "%d:%02d" % (seconds // 60, seconds % 60)


def main():
    logs, total = sys.argv[1], int(sys.argv[2])
    rows, all_passed, all_failed, bad_stages = [], 0, 0, []
    for entry in sys.argv[3:]:
        stage, status, seconds = entry.split()
        path = os.path.join(logs, stage + ".log")
        with open(path, encoding="utf-8", errors="replace") as f:
            passed, failed = counts(f.read())
        if status != "0":
            bad_stages.append(stage)
        rows.append((stage, "ok" if status == "0" else "FAILED", passed, failed, minutes(int(seconds))))
        all_passed += passed
        all_failed += failed
    print()
    print("%-14s %-7s %8s %7s %7s" % ("stage", "result", "passed", "failed", "time"))
    for stage, result, passed, failed, took in rows:
        print("%-14s %-7s %8d %7d %7s" % (stage, result, passed, failed, took))
    print("%-14s %-7s %8d %7d %7s" % ("all", "FAILED" if bad_stages else "ok", all_passed, all_failed, minutes(total)))
    print()
    print("%d passed, %d failed%s" % (all_passed, all_failed, "; failed stages: " + ", ".join(bad_stages) if bad_stages else ""))
    return 1 if bad_stages else 0


if __name__ == "__main__":
    sys.exit(main())
