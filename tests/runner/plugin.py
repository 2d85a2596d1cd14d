"""The suite's runner, a pytest plugin (tests/conftest.py loads it): the order the modules are
handed out in (runner/order.py), the container images made in the background (runner/images.py),
what each module cost (runner/census.py) and the warm starts of the session's `pipeline`
processes (runner/warm_start.py)."""

from __future__ import annotations

import json
import os
import shutil
import sysconfig
import tempfile
from pathlib import Path

import pytest
from _pytest.junitxml import xml_key  # where pytest keeps --junitxml's writer
from runner import census, images, warm_client, warm_start
from runner.order import DURATIONS, module_of, module_order

from pipeline.runtime import imports

# the tests that import TensorFlow in the worker's process import it as a `pipeline` command does
imports.skip_keras_extras()

# --- sharing out between workers (runner/order.py) --------------------------------------------


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    modules = {module_of(item.nodeid) for item in items}
    seconds = {m: DURATIONS["modules"].get(m, 0.0) for m in modules}
    waiting = {module_of(item.nodeid) for item in items if item.get_closest_marker("container")}
    # xdist hands out modules in the order its workers collected them, and a worker's own
    # options say no workers (numprocesses None): how many there are is in its environment
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or getattr(config.option, "numprocesses", None) or 1)
    order = module_order(seconds, waiting, DURATIONS["images_seconds"], workers)
    rank = {m: i for i, m in enumerate(order)}
    items.sort(key=lambda item: rank[module_of(item.nodeid)])


# --- the container images, made in the background (runner/images.py) -------------------------


def pytest_sessionstart(session):
    # the umask Debian and most distributions give a user: what the tests of output modes
    # expect of the session's trained project (tests/scenarios/test_e2e.py), whatever the caller's
    os.umask(0o022)
    # before xdist starts its workers, which inherit the variable: where the outcome will be
    if not hasattr(session.config, "workerinput"):
        os.environ[images.OUTCOME_VARIABLE] = str(Path(tempfile.mkdtemp(prefix="pipeline-images-")) / "made.json")


def _start_images(config, node_ids) -> None:
    if getattr(config, "_pipeline_images", None) is not None or config.option.collectonly:
        return
    if not any(module_of(nodeid) == "tests/scenarios/test_container.py" for nodeid in node_ids):
        return
    config._pipeline_images = images.Builder(Path(os.environ[images.OUTCOME_VARIABLE]))
    config._pipeline_images.start()


def pytest_collection_finish(session):
    if not hasattr(session.config, "workerinput"):  # not an xdist worker: this process runs the tests
        _start_images(session.config, [item.nodeid for item in session.items])


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids):
    _start_images(node.config, ids)


# --- what each module cost, against tests/durations.json (runner/census.py) --------------------
# The controller (the process xdist's workers report to) counts each module's seconds, setup and
# teardown included, as the JUnit XML does; every process of the environment counts what it
# imports and trains into the session's folder.


def pytest_configure(config):
    # before xdist starts its workers, which inherit the variable and run the `.pth` line
    if not hasattr(config, "workerinput") and not config.option.collectonly:
        config.stash[CENSUS] = census.start()
        os.environ[census.VARIABLE] = str(config.stash[CENSUS])
        config.stash[SECONDS] = {}
        config.stash[COUNTS] = {}
        config.stash[TIMELINE] = census.Timeline()
        _CONTROLLER.append(config)
        _start_warm(config)


def _start_warm(config) -> None:
    """Warm starts for the session's `pipeline` processes (runner/warm_start.py), unless the run
    turns them off (PIPELINE_TEST_WARM set empty) or measures coverage (a process forked from a
    server would not start coverage's tracer)."""
    if os.environ.get(warm_client.VARIABLE) == "" or "COVERAGE_PROCESS_CONFIG" in os.environ:
        return
    config.stash[WARM] = warm_start.start(sysconfig.get_paths()["purelib"])
    os.environ[warm_client.VARIABLE] = config.stash[WARM]
    os.environ[warm_client.CONTEXT] = warm_client.context()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item):
    """A test marked `cold_start` checks what a process does as it starts: its processes start
    as usual (runner/warm_start.py), from its setup to its teardown."""
    folder = os.environ.pop(warm_client.VARIABLE, None) if item.get_closest_marker("cold_start") else None
    try:
        yield
    finally:
        if folder is not None:
            os.environ[warm_client.VARIABLE] = folder


CENSUS = pytest.StashKey[Path]()
WARM = pytest.StashKey[str]()
SECONDS = pytest.StashKey[dict]()
COUNTS = pytest.StashKey[dict]()
TIMELINE = pytest.StashKey[census.Timeline]()
_CONTROLLER: list = []  # the controller's config, for the hook that is not handed it


def pytest_runtest_logreport(report):
    if _CONTROLLER:
        seconds = _CONTROLLER[0].stash[SECONDS]
        module = module_of(report.nodeid)
        seconds[module] = seconds.get(module, 0.0) + report.duration
        worker = getattr(getattr(getattr(report, "node", None), "gateway", None), "id", "master")  # xdist's
        _CONTROLLER[0].stash[TIMELINE].add(worker, report.start, report.stop, report.nodeid)


def _finish_census(config, xml) -> None:
    """The counts read, kept for the summary and the JUnit XML; the count stopped."""
    if CENSUS not in config.stash:
        return
    tests = census.read(config.stash[CENSUS], config.stash[TIMELINE])
    counts = config.stash[COUNTS] = census.by_module(tests)
    if xml is not None:
        xml.add_global_property("census", json.dumps({m: c.as_json() for m, c in sorted(counts.items())}))
        started = {t: c.as_json() for t, c in sorted(tests.items()) if c.tensorflow or c.warm or c.trainings}
        xml.add_global_property("census_tests", json.dumps(started))
    census.stop(config.stash[CENSUS])
    os.environ.pop(census.VARIABLE, None)
    if WARM in config.stash:
        warm_start.stop(config.stash[WARM], sysconfig.get_paths()["purelib"])
        os.environ.pop(warm_client.VARIABLE, None)


@pytest.hookimpl(trylast=True)  # the run's last lines: a module that grew is seen at every run
def pytest_terminal_summary(terminalreporter, config):
    builder = getattr(config, "_pipeline_images", None)
    if builder is not None and builder.made is not None:
        terminalreporter.write_line(images.summary(builder.made))
    if config.stash.get(SECONDS, None):
        terminalreporter.section("time by module")
        for line in census.report(config.stash[SECONDS], DURATIONS["modules"], config.stash[COUNTS]):
            terminalreporter.write_line(line)


@pytest.hookimpl(tryfirst=True)  # before the JUnit XML is written
def pytest_sessionfinish(session):
    builder = getattr(session.config, "_pipeline_images", None)
    xml = session.config.stash.get(xml_key, None)  # --junitxml's writer: the build time, for tests/durations.json
    if builder is not None and xml is not None and builder.made and "seconds" in builder.made:
        xml.add_global_property("images_seconds", f"{builder.made['seconds']:.0f}")
    if builder is not None:
        builder.finish()
    _finish_census(session.config, xml)
    if not hasattr(session.config, "workerinput"):
        shutil.rmtree(Path(os.environ.pop(images.OUTCOME_VARIABLE)).parent, ignore_errors=True)
