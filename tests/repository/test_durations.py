"""tests/durations.json, the order tests/runner/order.py hands the modules out in: it names modules
that exist, every scenario among them; scripts/test_durations.py writes it from a JUnit XML."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from support.project import ROOT

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
        '<properties><property name="images_seconds" value="890"/>'
        '<property name="census" value="{&quot;tests/scenarios/test_e2e.py&quot;: '
        "{&quot;tensorflow_processes&quot;: 3, &quot;trainings&quot;: 1}, &quot;tests/test_io.py&quot;: "
        '{&quot;tensorflow_processes&quot;: 0, &quot;trainings&quot;: 0}}"/></properties>'
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
            f"import json; j = {str(junit)!r}; "
            "print(json.dumps([m['module_seconds'](j), m['images_seconds'](j), m['census'](j)]))",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(found.stdout) == [
        {"tests/scenarios/test_e2e.py": 11.5, "tests/test_io.py": 0.2},
        890.0,
        {"tests/scenarios/test_e2e.py": {"tensorflow_processes": 3, "trainings": 1}},  # none started: left out
    ]


def test_a_container_module_waits_until_the_modules_before_it_cover_the_images_build():
    from runner.order import module_order

    seconds = {"e2e": 800.0, "container": 700.0, "faults": 500.0, "readme": 400.0, "io": 1.0, "new": 0.0}
    # per worker: e2e 400, faults 650, readme 850 >= 800: container after readme
    assert module_order(seconds, {"container"}, 800) == ["e2e", "faults", "readme", "container", "io", "new"]
    assert module_order(seconds, {"container"}, 0) == ["e2e", "container", "faults", "readme", "io", "new"]
    assert module_order(seconds, {"container"}, 10_000)[-1] == "container"  # never left out
    # the seconds shared out between the workers pytest runs: 500 s of images are covered after
    # faults on two (400, 650), after readme on three (267, 433, 567)
    assert module_order(seconds, {"container"}, 500)[:3] == ["e2e", "faults", "container"]
    assert module_order(seconds, {"container"}, 500, workers=3)[:4] == ["e2e", "faults", "readme", "container"]


def test_the_census_counts_what_each_process_imports_and_trains(tmp_path):
    """The `.pth` line as site.py runs it, in a child with a stand-in TensorFlow and trainer
    (the hook sees names, not contents): one import, two trainings, its CPU time at exit, all
    under the test that was running, and summed by module."""
    from runner import census

    fake = tmp_path / "fake"
    (fake / "tensorflow").mkdir(parents=True)
    (fake / "tensorflow" / "__init__.py").write_text("")
    (fake / "pipeline" / "training").mkdir(parents=True)
    (fake / "pipeline" / "__init__.py").write_text("")
    (fake / "pipeline" / "training" / "__init__.py").write_text("")
    (fake / "pipeline" / "training" / "trainer.py").write_text("def train(x):\n    return x + 1\n")
    site = tmp_path / "site"
    site.mkdir()
    (tmp_path / "site64").symlink_to(site)  # a venv's lib64 -> lib: site.py reads its .pth lines twice
    folder = census.start(site_packages=site)
    try:
        code = (
            f"import site, importlib.util; site.addsitedir({str(site)!r}); "
            f"site.addsitedir({str(tmp_path / 'site64')!r}); "
            "assert importlib.util.find_spec('tensorflow') is not None; import tensorflow, tensorflow; "
            "from pipeline.training import trainer; import pipeline.training.trainer as again; "
            "assert trainer.train(1) == 2 and again.train(2) == 3 and trainer.train.__name__ == 'train'; "
            "sum(range(3_000_000))"
        )
        env = {
            **os.environ,
            census.VARIABLE: str(folder),
            "PYTHONPATH": str(fake),
            "PYTEST_CURRENT_TEST": "tests/a/test_x.py::test_y (call)",
            "PYTEST_XDIST_WORKER": "gw1",
        }
        started = time.time()
        for child in (code, f"import site; site.addsitedir({str(site)!r})"):  # the second imports nothing
            subprocess.run([sys.executable, "-S", "-c", child], env=env, cwd=tmp_path, check=True)
        counts = census.read(folder)
        events = [
            json.loads(line)["event"] for path in folder.glob("*.jsonl") for line in path.read_text().splitlines()
        ]
        # the worker's own account: gw1 ran tests/b/test_z.py then (an environment copied
        # during tests/a/test_x.py names that one)
        timeline = census.Timeline()
        timeline.add("gw0", started - 5, time.time() + 5, "tests/c/test_w.py::test_v")
        timeline.add("gw1", started - 60, started - 50, "tests/a/test_x.py::test_y")
        timeline.add("gw1", started - 1, time.time() + 5, "tests/b/test_z.py::test_u[1]")
        attributed = census.read(folder, timeline)
    finally:
        census.stop(folder, site_packages=site)
    assert set(counts) == {"tests/a/test_x.py::test_y"}
    count = counts["tests/a/test_x.py::test_y"]
    assert (count.tensorflow, count.trainings) == (1, 2)
    assert (
        set(attributed) == {"tests/b/test_z.py::test_u[1]"}
        and attributed["tests/b/test_z.py::test_u[1]"].trainings == 2
    )
    assert count.cpu > 0  # the process that imported TensorFlow; the other one is not summed
    assert sorted(events) == ["exit", "exit", "tensorflow", "train", "train"]  # each once, the hook run once
    modules = census.by_module({**counts, "tests/a/test_x.py::test_t": census.Count(1, 0, 2.0)})
    assert set(modules) == {"tests/a/test_x.py"}
    assert (modules["tests/a/test_x.py"].tensorflow, modules["tests/a/test_x.py"].trainings) == (2, 2)
    assert modules["tests/a/test_x.py"].cpu == count.cpu + 2.0
    assert not (site / census.PTH).exists() and not folder.exists()


def test_the_end_of_a_run_names_the_modules_that_grew_most():
    from runner import census

    seconds = {"a.py": 120.0, "b.py": 10.0, "c.py": 50.0, "new.py": 3.0}
    recorded = {"a.py": 100.0, "b.py": 30.0, "c.py": 20.0}
    counts = {"c.py": census.Count(tensorflow=4, trainings=2, cpu=90.0, warm=1)}
    lines = census.report(seconds, recorded, counts, rows=3)
    assert lines[0] == "the modules whose time grew most against tests/durations.json:"
    assert "+30.0 s  2.50x  c.py  " in lines[1] and "4 imported TensorFlow    1 forked warm    2 trainings" in lines[1]
    assert "+20.0 s  1.20x  a.py  " in lines[2]
    assert " +3.0 s   new  new.py" in lines[3]  # b.py shrank: not a row
    assert lines[4] == (
        "4 modules in all: 183 s against 150 s; 4 processes imported TensorFlow and 1 were forked warm with it "
        "imported (90 CPU s), 2 trainings"
    )
    assert census.report({"b.py": 10.0}, recorded, {})[0] == "no module's time grew against tests/durations.json"


def test_the_script_prints_the_modules_table_of_docs_testing_md():
    import runpy

    table = runpy.run_path(str(ROOT / "scripts" / "test_durations.py"))["table"]
    seconds = {"tests/scenarios/test_e2e.py": 300.0, "tests/test_io.py": 2.0, "tests/training/test_x.py": 4.0}
    counts = {
        "tests/scenarios/test_e2e.py": {"tensorflow_processes": 9, "warm_processes": 6, "trainings": 4},
        "tests/training/test_x.py": {"tensorflow_processes": 1, "trainings": 1},  # a run before warm starts
        "(the pytest processes)": {"tensorflow_processes": 2, "trainings": 0},
    }
    assert table(seconds, counts) == [
        "| module | seconds | imported TensorFlow | forked warm | trainings |",
        "|---|---:|---:|---:|---:|",
        "| `scenarios/test_e2e.py` | 300 | 9 | 6 | 4 |",
        "| `training/test_x.py` | 4 | 1 | 0 | 1 |",  # under 10 s, but it started TensorFlow
        "| the other modules (1) | 2 | 0 | 0 | 0 |",
        "| (the pytest processes) | | 2 | 0 | 0 |",
        "| **all 3 modules** | **306** | **12** | **6** | **5** |",
    ]


def test_the_script_lists_the_tests_that_started_the_most_tensorflow_processes():
    import runpy

    busiest = runpy.run_path(str(ROOT / "scripts" / "test_durations.py"))["busiest"]
    seconds = {"tests.scenarios.test_e2e::test_a[x]": 12.0, "tests.test_io.TestAtomic::test_b": 3.5}
    counts = {
        "tests/scenarios/test_e2e.py::test_a[x]": {"tensorflow_processes": 3, "trainings": 1},
        "tests/test_io.py::TestAtomic::test_b": {"tensorflow_processes": 1, "trainings": 2},
        "tests/test_log.py::test_c": {"tensorflow_processes": 1, "trainings": 0},
        "(the pytest processes)": {"tensorflow_processes": 3, "trainings": 0},
    }
    lines = busiest(seconds, counts, 3)
    assert lines[0].split() == ["processes", "trainings", "seconds", "test"]
    assert [line.split() for line in lines[1:]] == [
        ["3", "1", "12.0", "tests/scenarios/test_e2e.py::test_a[x]"],
        ["3", "0", "(the", "pytest", "processes)"],  # no seconds of its own
        ["1", "2", "3.5", "tests/test_io.py::TestAtomic::test_b"],  # a class's test, by its JUnit name
    ]
