"""Fixtures: small dataset files served from 127.0.0.1, a two-node Slurm cluster, a real MLflow
server and the project trained once per session; the container images made in the background;
how the tests share out between xdist's workers."""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sysconfig
import tempfile
from dataclasses import dataclass
from pathlib import Path

import census
import images
import pytest
import warm_start
from _pytest.junitxml import xml_key  # where pytest keeps --junitxml's writer
from fixtures import FileServer, make_mnist_archive, make_reuters_npz, make_word_index
from helpers import (
    ROOT,
    copy_project,
    dvc,
    free_ports,
    git_repo,
    project_env,
    reuters_files_of,
    sh,
    start_mlflow_server,
    write_params,
)

from pipeline.runtime import imports

# the tests that import TensorFlow in the worker's process import it as a `pipeline` command does
imports.skip_keras_extras()

# --- sharing out between workers (pytest -n 3 --dist loadscope --no-loadscope-reorder) -----
# A module runs on one worker, so that its module fixtures are made once. Two trainings at once
# on 2 cores each run at about half speed: what a worker more gains is the time the others wait
# (servers, Slurm, Docker builds); with warm starts (tests/warm_start.py) the cores are not busy
# all the time on two workers, and a third made the run shorter (docs/testing.md). Modules are handed out
# longest first, by their seconds in a whole run (tests/durations.json, written from a run's
# JUnit XML by scripts/test_durations.py), so that the last ones handed out are short and the
# workers finish together; a module the file does not name (seconds, as a rule) comes after,
# in path order. A module of container tests waits for the images the session builds in the
# background: it is handed out once the modules before it add up to the images' build time (the
# same file's `images_seconds`, per worker), so that no worker sits waiting for them.
DURATIONS = json.loads((ROOT / "tests" / "durations.json").read_text())


def module_of(nodeid: str) -> str:
    return nodeid.split("::")[0]


def module_order(seconds: dict[str, float], waiting: set[str], images_seconds: float, workers: int = 2) -> list[str]:
    """The modules longest first, each of `waiting` as soon as those before it cover the images'
    build (their seconds over the number of workers)."""
    ranked = sorted(seconds, key=lambda m: (-seconds[m], m))
    order: list[str] = []
    pending: list[str] = []
    elapsed = 0.0
    for module in ranked:
        if elapsed >= images_seconds:
            order += pending
            pending = []
        if module in waiting and elapsed < images_seconds:
            pending.append(module)
            continue
        order.append(module)
        elapsed += seconds[module] / workers
    return order + pending


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


# --- the container images, made in the background (tests/images.py) -------------------------


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


# --- what each module cost, against tests/durations.json (tests/census.py) --------------------
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
    """Warm starts for the session's `pipeline` processes (tests/warm_start.py), unless the run
    turns them off (PIPELINE_TEST_WARM set empty) or measures coverage (a process forked from a
    server would not start coverage's tracer)."""
    if os.environ.get(warm_start.VARIABLE) == "" or "COVERAGE_PROCESS_CONFIG" in os.environ:
        return
    config.stash[WARM] = warm_start.start(sysconfig.get_paths()["purelib"])
    os.environ[warm_start.VARIABLE] = config.stash[WARM]
    os.environ[warm_start.CONTEXT] = warm_start.context()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item):
    """A test marked `cold_start` checks what a process does as it starts: its processes start
    as usual (tests/warm_start.py), from its setup to its teardown."""
    folder = os.environ.pop(warm_start.VARIABLE, None) if item.get_closest_marker("cold_start") else None
    try:
        yield
    finally:
        if folder is not None:
            os.environ[warm_start.VARIABLE] = folder


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
        os.environ.pop(warm_start.VARIABLE, None)


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
        _stop_cluster(session.config)
        _stop_trained_server(session.config)


# --- MLflow's process-wide state --------------------------------------------------------------
# mlflow.set_tracking_uri and set_registry_uri also set MLFLOW_TRACKING_URI / MLFLOW_REGISTRY_URI
# in os.environ "so that subprocesses inherit it": a test (or a module's fixture) that points
# this process at its server would otherwise point every later command of this worker there,
# long after the server has gone. Each is put back as it was around every test and module.

_MLFLOW_GLOBALS = (
    ("mlflow.tracking._tracking_service.utils", "_tracking_uri"),
    ("mlflow.tracking._model_registry.utils", "_registry_uri"),
)


def _mlflow_state():
    import sys

    env = {k: v for k, v in os.environ.items() if k.startswith("MLFLOW_")}
    return env, {(m, name): getattr(sys.modules[m], name) for m, name in _MLFLOW_GLOBALS if m in sys.modules}


def _put_back(state) -> None:
    import sys

    env, saved = state
    for key in [k for k in os.environ if k.startswith("MLFLOW_")]:
        if key not in env:
            del os.environ[key]
    os.environ.update(env)
    for m, name in [g for g in _MLFLOW_GLOBALS if g[0] in sys.modules]:
        setattr(sys.modules[m], name, saved.get((m, name)))


@pytest.fixture(autouse=True, scope="module")
def _mlflow_state_per_module():
    state = _mlflow_state()
    yield
    _put_back(state)


@pytest.fixture(autouse=True)
def _mlflow_state_per_test():
    state = _mlflow_state()
    yield
    _put_back(state)


# --- datasets and services -------------------------------------------------------------------


@pytest.fixture(scope="session")
def dataset_files(tmp_path_factory) -> Path:
    """A folder holding small files in the real formats, under the published base names."""
    root = tmp_path_factory.mktemp("served")
    make_reuters_npz(root / "reuters.npz")
    make_word_index(root / "reuters_word_index.json")
    make_mnist_archive(root / "mnist_png.tar.gz")
    return root


@pytest.fixture
def file_server(dataset_files):
    with FileServer(dataset_files) as server:
        yield server


def shared_folder(tmp_path_factory) -> Path:
    """The session's folder that every xdist worker shares (the controller's basetemp)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


CLUSTER_SCRIPTS = ROOT / "deploy" / "cluster"


@pytest.fixture(scope="session")
def cluster(tmp_path_factory) -> dict:
    """The two-node Slurm cluster of deploy/cluster/up.sh (slurmctld, a slurmd on node1 and on
    node2 in namespaces of their own, PostgreSQL and an MLflow server on the bridge), started
    once for the session by the first worker that needs it, under a lock (a host has one such
    bridge), and stopped when the session ends (pytest_sessionfinish): the variables of its
    cluster.env (SLURM_CONF, MLFLOW_TRACKING_URI, PIPELINE_TUNE_STORAGE) and its folder."""
    shared = shared_folder(tmp_path_factory)
    with open(shared / "cluster.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        named = shared / "cluster.path"
        if not named.exists():
            # in /var/tmp: the PostgreSQL server runs as postgres, who cannot enter the session's folder
            folder = Path(tempfile.mkdtemp(prefix="pipeline-cluster-", dir="/var/tmp"))
            started = subprocess.run(
                ["bash", str(CLUSTER_SCRIPTS / "up.sh"), str(folder)], capture_output=True, text=True
            )
            assert started.returncode == 0, started.stderr + started.stdout
            named.write_text(str(folder))
        folder = Path(named.read_text())
    env = dict(re.findall(r"^export (\w+)=(.*)$", (folder / "cluster.env").read_text(), re.M))
    return {"env": env, "folder": folder}


def _stop_cluster(config) -> None:
    named = config._tmp_path_factory.getbasetemp() / "cluster.path"
    if named.exists():
        subprocess.run(["bash", str(CLUSTER_SCRIPTS / "down.sh"), named.read_text()], capture_output=True)


@pytest.fixture(scope="session")
def postgres():
    """A real PostgreSQL server (Debian's), on 127.0.0.1 with a database `optuna`, started for
    these tests: its URL. It runs as the postgres user, so its folder is one that user owns."""
    import pwd

    bindir = sorted(Path("/usr/lib/postgresql").glob("*/bin"))[-1]
    folder = Path(tempfile.mkdtemp(prefix="pipeline-postgres-"))
    user = pwd.getpwnam("postgres")
    os.chown(folder, user.pw_uid, user.pw_gid)
    port = free_ports(1)[0]

    def as_postgres(*args):
        done = subprocess.run(["runuser", "-u", "postgres", "--", *map(str, args)], capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
        return done

    as_postgres(bindir / "initdb", "-D", folder / "data", "-U", "postgres", "--auth=trust", "-E", "UTF8")
    as_postgres(
        bindir / "pg_ctl",
        "-D",
        folder / "data",
        "-l",
        folder / "log",
        "-w",
        "-o",
        f"-p {port} -k {folder} -c listen_addresses=127.0.0.1",
        "start",
    )
    as_postgres(bindir / "createdb", "-h", "127.0.0.1", "-p", port, "-U", "postgres", "optuna")
    yield f"postgresql://postgres@127.0.0.1:{port}/optuna"
    as_postgres(bindir / "pg_ctl", "-D", folder / "data", "-m", "fast", "stop")
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory):
    """A real MLflow tracking server on 127.0.0.1 (one worker, artifacts proxied): the trained
    project's runs are there."""
    proc, url = start_mlflow_server(tmp_path_factory.mktemp("mlflow"), free_ports(1)[0])
    yield url
    proc.terminate()
    proc.wait(timeout=30)


# --- the project, trained once per session ---------------------------------------------------


# A clone's params.yaml but for the fixture data's checksums (so that the real check runs on
# them) and a shorter MNIST run: what README.md's session starts from.
def trained_overrides(served: Path) -> dict:
    return {
        "download.reuters.files": reuters_files_of(served),
        "train.mnist.epochs": 1,
        "train.mnist.batch_size_per_replica": 16,
    }


@dataclass(frozen=True)
class TrainedProject:
    """A git repository of the project after `dvc repro` of both datasets (runs logged to the
    MLflow server at `server`), its results committed; `first` and `second` are the two `dvc
    repro`s' output, `requested` what the file server was asked for. Read-only: `copy()` it
    to change it."""

    path: Path
    env: dict
    server: str
    first: subprocess.CompletedProcess
    second: subprocess.CompletedProcess
    requested: list

    def copy(self, dest: Path) -> Path:
        shutil.copytree(self.path, dest, symlinks=True)
        return dest

    def save(self, record: Path) -> None:
        done = {
            name: {"args": p.args, "returncode": p.returncode, "stdout": p.stdout, "stderr": p.stderr}
            for name, p in (("first", self.first), ("second", self.second))
        }
        record.write_text(
            json.dumps(
                {"path": str(self.path), "env": self.env, "server": self.server, "requested": self.requested, **done}
            )
        )

    @classmethod
    def load(cls, record: Path) -> TrainedProject:
        raw = json.loads(record.read_text())
        done = {name: subprocess.CompletedProcess(**raw[name]) for name in ("first", "second")}
        # the environment the worker that made it saved, but this worker's name: what a process
        # started with it ran under (tests/census.py puts it down to this worker's test)
        env = {**raw["env"], **{k: v for k, v in os.environ.items() if k == "PYTEST_XDIST_WORKER"}}
        return cls(Path(raw["path"]), env, raw["server"], requested=raw["requested"], **done)


def train_project(repo: Path, served: Path, server: str) -> TrainedProject:
    copy_project(repo)
    write_params(repo, trained_overrides(served))
    env = project_env(MLFLOW_TRACKING_URI=server)
    git_repo(repo, env, "clone")
    with FileServer(served) as files:
        env["PIPELINE_DATA_MIRROR"] = files.url
        first = dvc("repro", cwd=repo, env=env)
        sh("git", "add", "-A", cwd=repo, env=env)  # dvc.lock and the small results, as a user would
        sh("git", "commit", "-qm", "results", cwd=repo, env=env)
        second = dvc("repro", cwd=repo, env=env)
        requested = sorted({path for path, _ in files.requests})
    env.pop("PIPELINE_DATA_MIRROR")
    return TrainedProject(repo, env, server, first, second, requested)


@pytest.fixture(scope="session")
def trained_project(tmp_path_factory, request) -> TrainedProject:
    """The project trained once for the whole session: the first worker that needs it trains
    it (under a lock, in the folder all workers share), the others read its record. Its
    MLflow server lives to the end of the session (pytest_sessionfinish stops it)."""
    shared = shared_folder(tmp_path_factory)
    record = shared / "trained-project.json"
    with open(shared / "trained-project.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not record.exists():
            served = request.getfixturevalue("dataset_files")
            (shared / TRAINED_SERVER).mkdir(exist_ok=True)
            proc, server = start_mlflow_server(shared / TRAINED_SERVER, free_ports(1)[0])
            (shared / TRAINED_SERVER / "pid").write_text(str(proc.pid))
            train_project(shared / "trained-project", served, server).save(record)
    return TrainedProject.load(record)


# The trained project's tracking server, made by the worker that trains the project, lives to
# the end of the session: xdist stops a worker (and its session fixtures) once its share of
# modules is done, while the other may still use the server (tests/scenarios/test_serve.py).
TRAINED_SERVER = "trained-mlflow"


def _stop_trained_server(config) -> None:
    pid = config._tmp_path_factory.getbasetemp() / TRAINED_SERVER / "pid"
    if pid.exists():
        try:
            os.killpg(int(pid.read_text()), signal.SIGTERM)
        except ProcessLookupError:
            pass
