"""Helpers the tests share: fresh processes with a clean environment, a params file with
overrides, copies of the project, git and dvc commands, a pseudo-terminal, free ports, the
browser's flags. Fixtures live in conftest.py."""

import dataclasses
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import typing
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Debian's Chromium, as root and offline: without the background-networking flags it keeps
# trying to reach Google's hosts, which this network refuses.
CHROMIUM = os.environ.get("PIPELINE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "tests",
    "GIT_AUTHOR_EMAIL": "tests@localhost",
    "GIT_COMMITTER_NAME": "tests",
    "GIT_COMMITTER_EMAIL": "tests@localhost",
}


def subprocess_env(**extra) -> dict:
    env = dict(os.environ)
    env.update(
        {"PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "2", "DVC_NO_ANALYTICS": "1", "CUDA_VISIBLE_DEVICES": "-1"}
    )
    env.pop("PIPELINE_DATA_MIRROR", None)
    env.pop("MLFLOW_TRACKING_URI", None)
    env.update(extra)
    return env


def project_env(**extra) -> dict:
    """The environment of a user's shell in a clone: the suite's environment on PATH, a git
    identity, no PYTHONPATH (the stages run from the clone's code, as a user's would)."""
    env = subprocess_env(PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", **GIT_IDENTITY, **extra)
    env.pop("PYTHONPATH")
    return env


def run_pipeline(*args, cwd=None, env=None, timeout=600):
    """`python -m pipeline ARGS` in a fresh process (each TF/distributed case gets its own)."""
    return subprocess.run(
        [sys.executable, "-m", "pipeline", *map(str, args)],
        cwd=cwd or ROOT,
        env=env or subprocess_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def run_python(code: str, cwd=None, env=None, timeout=600, args=()):
    return subprocess.run(
        [sys.executable, "-c", code, *map(str, args)],
        cwd=cwd or ROOT,
        env=env or subprocess_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# `pipeline ARGS` through pipeline.cli.main, then which of the heavy packages its process held
_COMMAND_THEN_PROBE = """
import sys
from pipeline.cli import main
try:
    main(sys.argv[1:])
except SystemExit as exc:
    print("EXIT", exc.code, *sorted(m for m in ("tensorflow", "mlflow") if m in sys.modules))
"""


def run_command(args, cwd=None, env=None):
    """`pipeline ARGS` in a fresh process, as a user runs it: (result, exit code, the packages
    among tensorflow and mlflow it had imported when it exited). The probe's line is taken
    off result.stdout."""
    result = run_python(_COMMAND_THEN_PROBE, cwd=cwd, env=env, args=args)
    *printed, probe = result.stdout.splitlines() or [""]
    if not probe.startswith("EXIT "):
        raise _child_failed(result, "no exit line")
    _, code, *imported = probe.split()
    result.stdout = "".join(f"{line}\n" for line in printed)
    return result, int(code), set(imported)


def _child_failed(done, why: str) -> AssertionError:
    args = done.args if isinstance(done.args, str) else " ".join(map(str, done.args))
    return AssertionError(
        f"{why} from {args} (exit {done.returncode}):\nstdout: {done.stdout[-3000:]}\nstderr: {done.stderr[-5000:]}"
    )


def child_lines(done, n: int = 1) -> list[str]:
    """The last `n` lines a finished child printed on stdout; when it printed fewer, a failure
    that shows its exit code and stderr (why it printed nothing), not an IndexError."""
    lines = (done.stdout or "").strip().splitlines()
    if len(lines) < n:
        raise _child_failed(done, f"expected {n} line(s) of output, got {len(lines)},")
    return lines[-n:]


def child_json(done, last_line: bool = False, start: str = ""):
    """What a finished child printed on stdout, parsed as JSON (its last line only with
    `last_line`; from the first `start` on, when given); when that fails, a failure that shows
    the child's exit code and stderr, not only the parse error."""
    text = child_lines(done)[0] if last_line else (done.stdout or "")
    if start:
        text = text[text.find(start) :] if start in text else ""
    try:
        return json.loads(text)
    except ValueError as exc:
        raise _child_failed(done, f"no JSON ({exc})") from None


def unlike_plain_files(root: Path, names: typing.Iterable[str], umask: int) -> list[str]:
    """The files and folders under `root`'s `names` (outputs) whose mode is not the one a
    plain `open()` or `mkdir()` gives under `umask`, each with its mode: [] when all are."""
    found = []
    for name in names:
        for path in [root / name, *sorted((root / name).rglob("*"))]:
            if path.is_symlink():
                continue
            mode = path.stat().st_mode & 0o777
            full = 0o777 if path.is_dir() or mode & 0o111 else 0o666
            if mode != full & ~umask:
                found.append(f"{path.relative_to(root)} {mode:o}")
    return found


def forget_tracking_uri() -> None:
    """Unset MLflow's process-wide tracking URI (use_store sets it): the environment's rules again."""
    import mlflow

    mlflow.set_tracking_uri(None)  # type: ignore[arg-type]  # MLflow takes None (unset); its hint says str | Path


def use_sqlite(tmp_path: Path, monkeypatch) -> str:
    """Point this process's MLflow at a new sqlite store in `tmp_path` and work there; its URI."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.chdir(tmp_path)
    return uri


@functools.cache
def fixture_images_sha256() -> str:
    """preprocess.mnist.images_sha256 of the tests' MNIST archive (`make_mnist_archive` with
    its defaults, what `dataset_files` serves): the shipped value pins the real 70,000 images."""
    import tempfile

    from fixtures import make_mnist_archive

    from pipeline.config.loading.loader import load_params
    from pipeline.data import images
    from pipeline.kinds.image_folders import ImageFoldersPreprocessConfig

    cfg = load_params(ROOT / "params.yaml", "mnist").preprocess
    assert isinstance(cfg, ImageFoldersPreprocessConfig)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "raw").mkdir()
        make_mnist_archive(Path(tmp) / "raw" / "mnist_png.tar.gz")
        found = images.prepare(
            Path(tmp) / "raw", Path(tmp) / "out", dataclasses.replace(cfg, images_sha256=None), "preprocess.mnist"
        )
    return found.facts.images_sha256


def write_params(folder: Path, overrides: dict | None = None) -> Path:
    """Copy the shipped params.yaml into `folder`, with dotted-key overrides applied; MNIST's
    images digest is the test archive's (`fixture_images_sha256`) unless an override sets it."""
    import yaml

    from pipeline.config.commands.params_doc import format_params

    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    overrides = {"preprocess.mnist.images_sha256": fixture_images_sha256(), **(overrides or {})}
    for key, value in overrides.items():
        node = raw
        *parents, last = key.split(".")
        for part in parents:
            node = node[part]
        assert last in node, key
        node[last] = value
    path = Path(folder) / "params.yaml"
    path.write_text(format_params(raw))  # the shipped file's form: `dvc exp run -S` changes one line
    return path


# a short custom-loop Reuters training on fixture data: what the multi-worker tests train
SHORT_CUSTOM_REUTERS = {
    "preprocess.reuters.max_len": 60,
    "train.reuters.loop": "custom",
    "train.reuters.epochs": 2,
    "train.reuters.batch_size_per_replica": 8,
}


def prepared_reuters(folder: Path, out: str = "prepared", n: int = 240, **overrides) -> Path:
    """Fixture Reuters (`n` newswires) in folder/raw, params.yaml for SHORT_CUSTOM_REUTERS and
    `overrides` (param keys with `.` written `__`), and the preprocess stage's folder/`out`."""
    from fixtures import make_reuters_raw

    make_reuters_raw(folder / "raw", n=n)
    write_params(folder, {**SHORT_CUSTOM_REUTERS, **{k.replace("__", "."): v for k, v in overrides.items()}})
    done = run_pipeline("preprocess", "reuters", "--raw", "raw", "--out", out, cwd=folder)
    assert done.returncode == 0, done.stderr
    return folder


def project_files() -> list[str]:
    """What a clone of this checkout holds: tracked files and new ones not ignored."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split("\0")
    return [name for name in listed if name and (ROOT / name).is_file()]


def copy_project(dest: Path, exclude: tuple[str, ...] = ()) -> Path:
    """A copy of what a clone of this checkout holds, in `dest`, without the paths that start
    with one of `exclude` (a folder ends with /)."""
    for name in project_files():
        if name.startswith(exclude):
            continue
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, dest / name)
    if (dest / "params.yaml").exists():  # the shipped params, but for the test archive's digest
        write_params(dest)
    return dest


def sh(*args, cwd, env, check=True, timeout=1200):
    """Run a command; with `check`, a failure shows its command, exit code and output's end.

    The command runs in a process group of its own: past `timeout` seconds the whole group is
    killed (a shell's children and DVC's queue workers too, which would otherwise go on loading
    the machine under the next tests) and the failure shows what the command had printed."""
    proc = subprocess.Popen(
        [str(a) for a in args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:  # the group had ended meanwhile
            pass
        out, err = proc.communicate()
        raise AssertionError(
            f"{' '.join(map(str, args))} still running after {timeout} s, killed:\n{out[-3000:]}\n{err[-5000:]}"
        ) from None
    result = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    if check and result.returncode != 0:
        raise AssertionError(
            f"{' '.join(map(str, args))} failed ({result.returncode}):\n"
            f"{result.stdout[-3000:]}\n{result.stderr[-5000:]}"
        )
    return result


def dvc(*args, cwd, env, check=True, timeout=1200):
    """`dvc ARGS` from the tests' environment (`sh` with its checks)."""
    return sh(sys.executable, "-m", "dvc", *args, cwd=cwd, env=env, check=check, timeout=timeout)


def git_repo(folder: Path, env: dict, message: str = "project") -> None:
    """`git init` in `folder` and commit everything in it."""
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", message]):
        sh("git", *args, cwd=folder, env=env)


def run_on_terminal(args, cwd, env, columns=100, timeout=600) -> tuple[int, str]:
    """Run a command with stderr on a pseudo-terminal `columns` wide; (exit code, what it drew)."""
    import fcntl
    import pty
    import struct
    import termios

    master, slave = pty.openpty()
    # a new pty has 0 columns, and tqdm would draw an empty bar
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    proc = subprocess.Popen(args, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:  # the terminal closes when the process exits
            break
        if not data:
            break
        chunks.append(data)
    code = proc.wait(timeout=timeout)
    os.close(master)
    return code, b"".join(chunks).decode(errors="replace")


def free_ports(n: int) -> list[int]:
    """Ports on 127.0.0.1 that nothing listens on (free when asked)."""
    import socket

    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def reuters_files_of(served: Path) -> list:
    """params' download.reuters.files with the sha256 of the fixtures in `served`, so that the
    real check runs on them."""
    import hashlib

    import yaml

    files = yaml.safe_load((ROOT / "params.yaml").read_text())["download"]["reuters"]["files"]
    for entry in files:
        entry["sha256"] = hashlib.sha256((Path(served) / Path(entry["url"]).name).read_bytes()).hexdigest()
    return files


def start_mlflow_server(root: Path, port: int, timeout: float = 120):
    """A real MLflow tracking server on 127.0.0.1:`port` (one worker, artifacts proxied), its
    store and artifacts in `root`; (process, URL) once /health answers."""
    # without MLflow's GenAI job runners (huey consumers: about 1 GB and a share of a core
    # while idle), which nothing here uses; and without coverage (make coverage): a server runs no
    # code of the project, and coverage's tracer costs a process about a fifth of its CPU
    env = subprocess_env(MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false")
    env.pop("COVERAGE_PROCESS_CONFIG", None)
    log = open(Path(root) / "server.log", "a")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mlflow",
            "server",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
            "--backend-store-uri",
            f"sqlite:///{Path(root) / 'mlflow.db'}",
            "--artifacts-destination",
            str(Path(root) / "artifacts"),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )
    log.close()
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_url(
            f"{url}/health",
            timeout,
            why_not=lambda: (Path(root) / "server.log").read_text()[-2000:],
            alive=lambda: proc.poll() is None,
        )
    except AssertionError:
        proc.kill()
        raise
    return proc, url


def config_classes() -> list[type]:
    """Every config class a params section can be (every kind's and reader's), nested ones included."""
    found: list[type] = []

    def visit(cls):
        if cls in found:
            return
        found.append(cls)
        for tp in typing.get_type_hints(cls).values():
            for arg in (tp, *typing.get_args(tp), *[a for t in typing.get_args(tp) for a in typing.get_args(t)]):
                if dataclasses.is_dataclass(arg):
                    visit(arg)

    from pipeline.config.keys.training import TRAIN_CONFIGS
    from pipeline.config.loading.datasets import COMMON
    from pipeline.kinds.known import KINDS

    for cls in COMMON.values():
        visit(cls)
    for kind in KINDS.values():
        for reader in kind.readers.values():
            visit(reader.preprocess)
        visit(TRAIN_CONFIGS[kind.name])
    return found


def field_cases() -> list:
    """(config class, dataclass field) of every key of the schema."""
    return [(cls, f) for cls in config_classes() for f in dataclasses.fields(cls)]


def reuters_model(*, max_len: int, vocab_size: int, embedding_dim: int = 4):
    """The Reuters model with params.yaml's layers (models.build_model), sized for small test data."""
    from pipeline.config.keys.training import TRAIN_CONFIGS
    from pipeline.config.loading.loader import load_params
    from pipeline.training import models

    cfg = load_params(ROOT / "params.yaml", "reuters").train
    assert isinstance(cfg, TRAIN_CONFIGS["labelled_texts"])
    return models.build_model(with_settings(cfg, embedding_dim=embedding_dim), described(max_len, vocab_size))


def with_settings(cfg, **changes):
    """A train section whose chosen model's settings (train.<ds>.<model>) have these changes."""
    return dataclasses.replace(cfg, **{cfg.model: dataclasses.replace(cfg.settings, **changes)})


def samples(**counts: int):
    """The description of a prepared dataset that has no files, with these sample counts by
    split: what a run logs of the data it read."""
    from pipeline.data.prepared import Prepared, Split

    splits = {name: Split(n, [n], ()) for name, n in counts.items()}
    return Prepared(Path(), "sequences", (3,), ["a"], splits, {})


def described(max_len: int, vocab_size: int, num_classes: int = 46):
    """The description of a prepared dataset of texts that has no files: what a model is sized from."""
    from pipeline.data.prepared import Prepared
    from pipeline.kinds.labelled_texts import full_length_facts

    names = [str(c) for c in range(num_classes)]
    return Prepared(Path(), "sequences", (max_len,), names, {}, full_length_facts(max_len, vocab_size))


def marker_env(python: str, machine: str) -> dict:
    """The environment markers of CPython `python` on Linux `machine`, to read a universal lock with."""
    return {
        "python_version": python,
        "python_full_version": f"{python}.0",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "platform_machine": machine,
        "os_name": "posix",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "extra": "",
    }


def wait_for_url(url: str, timeout: float, why_not=lambda: "", alive=lambda: True) -> None:
    """Until `url` answers a GET (any status), at most `timeout` seconds, or until `alive()`
    says the server's process has ended; then an AssertionError with `why_not()` (its log)."""
    import time
    import urllib.error
    import urllib.request

    deadline = time.time() + timeout
    while True:
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except urllib.error.HTTPError:
            return
        except OSError:
            pass
        if time.time() > deadline or not alive():
            raise AssertionError(f"{url} did not answer ({'gave up' if alive() else 'its server ended'}):\n{why_not()}")
        time.sleep(0.5)


def stand_in_run(uri: str) -> str:
    """A run holding a stand-in model file, made through a client of `uri` (not MLflow's
    process-wide active experiment, which an earlier test on this worker may have set)."""
    import uuid

    from mlflow import MlflowClient

    client = MlflowClient(uri)
    run = client.create_run(client.create_experiment(f"stand-ins-{uuid.uuid4().hex[:8]}"))
    client.log_text(run.info.run_id, "a stand-in for a model", "model/MLmodel")
    client.set_terminated(run.info.run_id)
    return run.info.run_id


def mobilenet_weights(path: Path, alpha: float) -> Path:
    """A stand-in for Keras' published MobileNetV2 ImageNet weights without top (the same legacy
    HDF5 layout, layer names and shapes, random values), written to `path`."""
    import h5py  # Keras' dependency: only in the tests that build one
    import keras
    from keras.src.legacy.saving import legacy_h5_format

    model = keras.applications.MobileNetV2(input_shape=(96, 96, 3), alpha=alpha, include_top=False, weights=None)
    with h5py.File(path, "w") as handle:
        legacy_h5_format.save_weights_to_hdf5_group(handle, model)
    return path


def empty_database(server: str, name: str) -> str:
    """A new database on the PostgreSQL server of the URL `server`, with no table: its URL."""
    import sqlalchemy  # Optuna's dependency: only in the tests that make one

    from pipeline.tuning import storage

    engine = sqlalchemy.create_engine(storage.database_url(server), isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as connection:
            connection.execute(sqlalchemy.text(f'CREATE DATABASE "{name}"'))
    finally:
        engine.dispose()
    return server.rsplit("/", 1)[0] + "/" + name


def wait_for(what: str, done, timeout: float = 600, every: float = 0.5):
    """`done()`'s first true value, asked every `every` seconds; an AssertionError naming `what`
    after `timeout` seconds."""
    import time

    deadline = time.time() + timeout
    while True:
        found = done()
        if found:
            return found
        assert time.time() < deadline, f"not within {timeout:.0f} s: {what}"
        time.sleep(every)
