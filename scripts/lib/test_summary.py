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

def failures_of_unittest(m):
    """unittest's "FAILED (failures=1, errors=2)": those failed, and were counted as run."""
    bad = sum(int(n) for n in re.findall(r"(?:failures|errors)=(\d+)", m.group(1)))
    return -bad, bad


def pytest_totals(m):
    words = dict((word.rstrip("s"), int(number)) for number, word in re.findall(r"(\d+) (passed|failed|errors?)", m.group(1)))
    return words.get("passed", 0), words.get("failed", 0) + words.get("error", 0)


# What each runner prints about its tests, line by line: a pattern, and what
# a match adds to (passed, failed).
LINES = [
    # unittest: "Ran 13 tests in ..." and, on failure, "FAILED (failures=1, errors=2)".
    (re.compile(r"^Ran (\d+) tests? in "), lambda m: (int(m.group(1)), 0)),
    (re.compile(r"^FAILED \((.*)\)"), failures_of_unittest),
    # pytest's closing line: "==== 81 passed, 1 failed in 37.38s ====".
    (re.compile(r"^=+ (.*\d+ (?:passed|failed|errors?).*) in [\d.]+s"), pytest_totals),
    # node --test: "ℹ pass 43" / "ℹ fail 0".
    (re.compile(r"^ℹ pass (\d+)$"), lambda m: (int(m.group(1)), 0)),
    (re.compile(r"^ℹ fail (\d+)$"), lambda m: (0, int(m.group(1)))),
    # go test: one "ok" or "FAIL" line per package.
    (re.compile(r"^ok\s+\S+\s"), lambda m: (1, 0)),
    (re.compile(r"^FAIL\s+\S+\s"), lambda m: (0, 1)),
    # JUnit's console launcher: "[ 57 tests successful ]", "[ 0 tests failed ]".
    (re.compile(r"\[\s+(\d+) tests successful\s+\]"), lambda m: (int(m.group(1)), 0)),
    (re.compile(r"\[\s+(\d+) tests failed\s+\]"), lambda m: (0, int(m.group(1)))),
    # schemathesis: "12806 generated, 12806 passed".
    (re.compile(r"^\s*\d+ generated, (\d+) passed(?:, (\d+) failed)?"), lambda m: (int(m.group(1)), int(m.group(2) or 0))),
    # larder check's last line: "5 passed, 0 failed" (nothing before it).
    (re.compile(r"^(\d+) passed, (\d+) failed$"), lambda m: (int(m.group(1)), int(m.group(2)))),
]

# XCTest's summary: "Executed 249 tests, with 5 tests skipped and 0 failures", repeated per suite.
XCTEST = re.compile(r"Executed (\d+) tests?, with (?:(\d+) tests? skipped and )?(\d+) failures?")
# The line before a run's own total.
XCTEST_RUN = re.compile(r"^Test Suite '(?:All tests|Selected tests)' (?:passed|failed) at ")


def counts(text):
    """(passed, failed) as the runners in `text` report them."""
    passed = failed = 0
    lines = text.splitlines()
    # XCTest repeats its bundle total: each run's is the line after its
    # top suite ends (a stage may run the suite twice: swift's, with and
    # without the portable calls); else the largest "Executed" line.
    runs = [XCTEST.search(lines[i + 1]) for i, line in enumerate(lines[:-1]) if XCTEST_RUN.search(line)]
    runs = [m for m in runs if m]
    if not runs:
        executed = [m for m in map(XCTEST.search, lines) if m]
        runs = [max(executed, key=lambda m: int(m.group(1)))] if executed else []
    for whole in runs:
        failures = int(whole.group(3))
        passed += int(whole.group(1)) - int(whole.group(2) or 0) - failures
        failed += failures
    for line in lines:
        for pattern, adds in LINES:
            m = pattern.search(line)
            if m:
                more_passed, more_failed = adds(m)
                passed += more_passed
                failed += more_failed
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
