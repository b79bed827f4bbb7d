#!/usr/bin/env python3
"""Lists every skip of a ctest run, with its reason, from ctest's JUnit report (--output-junit).

    ctest_skips.py REPORT.xml

A skip is: a ctest test that did not run or was reported skipped (SKIP_RETURN_CODE,
SKIP_REGULAR_EXPRESSION), or a skipped part inside a test that passed — a GoogleTest case's
GTEST_SKIP ("[  SKIPPED ]") or a pytest skip ("SKIPPED [n] file:line: reason", pytest -rs).
Prints one line per skip and a count; prints "none" when nothing was skipped. Exit status 0.
"""
import sys
import xml.etree.ElementTree as ET


def reason_of(out):
    """The line that says why: GoogleTest prints it after "Skipped", scripts print "SKIP: ..."."""
    lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
    for i, ln in enumerate(lines):
        if ln.endswith(": Skipped") and i + 1 < len(lines):
            return lines[i + 1]
        if ln.startswith("SKIP"):
            return ln
    return lines[-1] if lines else "(no output)"


def main(path):
    skips = []
    for case in ET.parse(path).getroot().iter("testcase"):
        name, out = case.get("name"), case.findtext("system-out") or ""
        skipped = case.find("skipped")
        if skipped is not None or case.get("status") == "notrun":
            why = skipped.get("message") if skipped is not None else "not run"
            skips.append(f"{name}: {reason_of(out)} [{why}]")
            continue
        pytest_skips = [ln.strip() for ln in out.splitlines() if ln.startswith("SKIPPED [")]
        skips += [f"{name}: {ln}" for ln in pytest_skips]
        if "[  SKIPPED ]" in out:  # a GoogleTest case that skipped without a SKIP_REGULAR_EXPRESSION
            skips.append(f"{name}: {reason_of(out)} [GTEST_SKIP]")
    print(f"   skipped: {len(skips) if skips else 'none'}")
    for s in skips:
        print(f"     - {s}")


if __name__ == "__main__":
    main(sys.argv[1])
