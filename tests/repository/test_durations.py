"""tests/durations.json, the order tests/conftest.py hands the modules out in: it names modules
that exist, every scenario among them; scripts/test_durations.py writes it from a JUnit XML."""

from __future__ import annotations

import json
import subprocess
import sys

from helpers import ROOT

DURATIONS = ROOT / "tests" / "durations.json"


def test_it_names_existing_modules_and_every_scenario():
    durations = json.loads(DURATIONS.read_text())
    assert durations["images_seconds"] > 0
    recorded = durations["modules"]
    gone = sorted(path for path in recorded if not (ROOT / path).is_file())
    assert gone == [], "tests/durations.json names modules that are gone: rewrite it (scripts/test_durations.py)"
    scenarios = {str(p.relative_to(ROOT)) for p in (ROOT / "tests" / "scenarios").glob("test_*.py")}
    assert sorted(scenarios - set(recorded)) == [], "a scenario tests/durations.json has no time for"
    assert list(recorded.values()) == sorted(recorded.values(), reverse=True)


def test_the_script_sums_a_junit_xml_by_module(tmp_path):
    junit = tmp_path / "junit.xml"
    junit.write_text(
        '<testsuites><testsuite name="pytest">'
        '<properties><property name="images_seconds" value="890"/></properties>'
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
            f"import json; j = {str(junit)!r}; print(json.dumps([m['module_seconds'](j), m['images_seconds'](j)]))",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(found.stdout) == [{"tests/scenarios/test_e2e.py": 11.5, "tests/test_io.py": 0.2}, 890.0]


def test_a_container_module_waits_until_the_modules_before_it_cover_the_images_build():
    from conftest import module_order

    seconds = {"e2e": 800.0, "container": 700.0, "faults": 500.0, "readme": 400.0, "io": 1.0, "new": 0.0}
    # per worker: e2e 400, faults 650, readme 850 >= 800: container after readme
    assert module_order(seconds, {"container"}, 800) == ["e2e", "faults", "readme", "container", "io", "new"]
    assert module_order(seconds, {"container"}, 0) == ["e2e", "container", "faults", "readme", "io", "new"]
    assert module_order(seconds, {"container"}, 10_000)[-1] == "container"  # never left out
