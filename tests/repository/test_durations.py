"""tests/durations.json, the order tests/conftest.py hands the modules out in: it names modules
that exist, every scenario among them; scripts/test_durations.py writes it from a JUnit XML."""

from __future__ import annotations

import json
import subprocess
import sys

from helpers import ROOT

DURATIONS = ROOT / "tests" / "durations.json"


def test_it_names_existing_modules_and_every_scenario():
    recorded = json.loads(DURATIONS.read_text())
    gone = sorted(path for path in recorded if not (ROOT / path).is_file())
    assert gone == [], "tests/durations.json names modules that are gone: rewrite it (scripts/test_durations.py)"
    scenarios = {str(p.relative_to(ROOT)) for p in (ROOT / "tests" / "scenarios").glob("test_*.py")}
    assert sorted(scenarios - set(recorded)) == [], "a scenario tests/durations.json has no time for"
    assert list(recorded.values()) == sorted(recorded.values(), reverse=True)


def test_the_script_sums_a_junit_xml_by_module(tmp_path):
    junit = tmp_path / "junit.xml"
    junit.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="tests.scenarios.test_e2e" name="a" time="10.5"/>'
        '<testcase classname="tests.scenarios.test_e2e" name="b" time="1"/>'
        '<testcase classname="tests.test_io.TestAtomic" name="c" time="0.25"/>'
        '<testcase classname="tests.gone" name="d" time="99"/>'
        "</testsuite></testsuites>"
    )
    script = ROOT / "scripts" / "test_durations.py"
    found = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import runpy; m = runpy.run_path({str(script)!r}); "
            f"import json; print(json.dumps(m['module_seconds']({str(junit)!r})))",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(found.stdout) == {"tests/scenarios/test_e2e.py": 11.5, "tests/test_io.py": 0.2}
