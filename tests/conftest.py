"""The fixtures: small dataset files served from 127.0.0.1, a two-node Slurm cluster, a real
PostgreSQL and MLflow server, the project trained once per session, MLflow's process-wide state
put back around every test. The helpers the tests import are in tests/support/, by topic; the
suite's runner (the order the modules run in, the container images made in the background, the
census, the warm starts) is the pytest plugin in tests/runner/, loaded here."""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.datasets import FileServer, make_mnist_archive, make_reuters_npz, make_word_index, reuters_files_of
from support.processes import dvc, git_repo, project_env, sh
from support.project import ROOT, copy_project, write_params
from support.servers import free_ports, start_mlflow_server

pytest_plugins = ("runner.plugin",)

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
        # started with it ran under (tests/runner/census.py puts it down to this worker's test)
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


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session):
    """What the session's fixtures started for every worker, stopped once the last is done
    (xdist's controller, or the one process that ran the tests)."""
    if not hasattr(session.config, "workerinput"):
        _stop_cluster(session.config)
        _stop_trained_server(session.config)
