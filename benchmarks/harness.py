"""What the benchmarks share: the repository's root (first on sys.path, so that a benchmark runs
this checkout's code), a command measured as a whole process, the stages' command lines, a
throw-away MLflow store, and the params file with `-S` overrides.

A benchmark is a script beside this module (`python benchmarks/NAME.py`), which Python puts on
sys.path first: it imports this module as `harness`. Nothing here imports TensorFlow: a measured
command is started from a small process (see `run_measured`).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

PARAMS = ROOT / "params.yaml"


# --------------------------------------------------------------------------- measured processes


@dataclass(frozen=True)
class Measured:
    """A command run to its end, as the operating system counted it (wait4)."""

    code: int  # exit code
    seconds: float  # wall time
    cpu_seconds: float  # user + system time of the process and the descendants it waited for
    peak_mb: float  # peak RSS in MiB of the largest process among them
    out: str = ""  # stdout and stderr, when `run` kept them
    err: str = ""


def _mib(maxrss: int) -> float:
    """ru_maxrss in MiB: Linux counts it in KiB, macOS in bytes."""
    return maxrss / (1024 * 1024 if sys.platform == "darwin" else 1024)


def run_measured(args: Sequence[str], **popen_kwargs) -> Measured:
    """Run a command to its end: its exit code, wall seconds, CPU seconds and peak RSS in MiB of
    the largest process among it and the descendants it waited for, the operating system's own
    count (wait4). Pass stdout/stderr as files or DEVNULL: nothing is read from pipes here.

    Call it from a small process: Linux counts the caller's own resident memory at the fork in
    the child's peak too (exec keeps the old address space's high-water mark)."""
    start = time.perf_counter()
    proc = subprocess.Popen(list(args), **popen_kwargs)
    _, status, rusage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return Measured(
        proc.returncode, time.perf_counter() - start, rusage.ru_utime + rusage.ru_stime, _mib(rusage.ru_maxrss)
    )


def run(args: Sequence[str], cwd: Path | str, env: dict[str, str], *, check: bool = True) -> Measured:
    """`run_measured` with stdout and stderr kept (in `out` and `err`); with `check`, a command
    that fails ends the benchmark with the command line and the tail of what it printed."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        measured = run_measured(args, cwd=cwd, env=env, stdout=out, stderr=err)
        out.seek(0)
        err.seek(0)
        measured = Measured(**{**measured.__dict__, "out": out.read(), "err": err.read()})
    if check and measured.code != 0:
        sys.exit(f"{' '.join(map(str, args))} failed ({measured.code}):\n{(measured.out + measured.err)[-6000:]}")
    return measured


# --------------------------------------------------------------------------- the stages' command lines


def pipeline_argv(*args: object, quiet: bool = True) -> list[str]:
    """`python -m pipeline [-q] ARGS...` with this interpreter."""
    return [sys.executable, "-m", "pipeline", *(["-q"] if quiet else []), *map(str, args)]


def preprocess_argv(dataset: str, raw: Path, out: Path, *, quiet: bool = True) -> list[str]:
    """The preprocess stage: the raw files in `raw`, the prepared data written to `out`."""
    return pipeline_argv("preprocess", dataset, "--raw", raw, "--out", out, quiet=quiet)


def train_argv(
    dataset: str, data: Path, out: Path, *, model_dir: Path | None = None, quiet: bool = True, extra: Sequence[str] = ()
) -> list[str]:
    """The train stage on the prepared data `data`, everything it writes in `out`: model/ (or
    `model_dir`), history.csv, train.json, curves.png, measurements.json (`train_figures`)."""
    return pipeline_argv(
        "train",
        dataset,
        "--data",
        Path(data).resolve(),
        "--model-dir",
        model_dir or out / "model",
        "--history",
        out / "history.csv",
        "--summary",
        out / "train.json",
        "--curves",
        out / "curves.png",
        "--measurements",
        out / "measurements.json",
        *extra,
        quiet=quiet,
    )


def evaluate_argv(dataset: str, data: Path, model_dir: Path, out: Path, *, quiet: bool = True) -> list[str]:
    """The evaluate stage of the model in `model_dir`: metrics.json, per_class.csv,
    confusion.csv and confusion.png in `out`."""
    return pipeline_argv(
        "evaluate",
        dataset,
        "--data",
        Path(data).resolve(),
        "--model-dir",
        model_dir,
        "--metrics",
        out / "metrics.json",
        "--per-class",
        out / "per_class.csv",
        "--confusion",
        out / "confusion.csv",
        "--confusion-png",
        out / "confusion.png",
        quiet=quiet,
    )


def train_figures(out: Path) -> dict:
    """What a `train_argv` run wrote in `out`: train.json's results and measurements.json's."""
    import json

    return {**json.loads((out / "train.json").read_text()), **json.loads((out / "measurements.json").read_text())}


# --------------------------------------------------------------------------- environments


def mlflow_env(folder: Path | str, *, tf_notices: bool = False) -> dict[str, str]:
    """This environment with a throw-away MLflow store in `folder` (sqlite), this checkout first
    on PYTHONPATH (so that `python -m pipeline` runs its code), and TensorFlow's C++ notices off
    unless `tf_notices` (then as the environment has them, as a user's run shows them)."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        "MLFLOW_TRACKING_URI": f"sqlite:///{Path(folder) / 'mlflow.db'}",
    }
    if not tf_notices:
        env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    return env


def dvc_env() -> dict[str, str]:
    """This environment for `dvc` in a clone of the project: no analytics, this interpreter's
    folder first on PATH (the stages' `python`), and the clone's own MLflow store."""
    env = dict(os.environ, DVC_NO_ANALYTICS="1", TF_CPP_MIN_LOG_LEVEL="2")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env.pop("MLFLOW_TRACKING_URI", None)
    return env


def host_line() -> str:
    return f"host: {platform.node()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"


# --------------------------------------------------------------------------- arguments, params and -S


def positive_int(text: str) -> int:
    """An argparse type: an integer of at least 1 (argparse's usage error, exit 2, otherwise)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def positive_ints(text: str) -> list[int]:
    """An argparse type: positive integers separated by commas ("1,2,4")."""
    try:
        counts = [int(n) for n in text.split(",")]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers separated by commas, got {text!r}")
    return counts


def add_overrides(parser: argparse.ArgumentParser, help: str = "A param, as `dvc exp run -S` sets it.") -> None:
    """`-S/--set KEY=VALUE`, repeatable, into `overrides`."""
    parser.add_argument("-S", "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help=help)


def _config_exit(exc, hide: Path | None = None) -> NoReturn:
    text = str(exc).replace(f"{hide}{os.sep}", "") if hide else str(exc)
    print(f"error: {text}", file=sys.stderr)
    sys.exit(exc.exit_code)


def load_params(dataset: str, overrides: Sequence[str] = (), path: Path = PARAMS):
    """The params of `dataset` in force with `overrides` (checked against the repository's
    params file, so that an error names it: one `error:` line and the config error's exit)."""
    from pipeline.config.loading import loader
    from pipeline.errors import ConfigError

    try:
        return loader.load_params(path, dataset, list(overrides))
    except ConfigError as exc:
        _config_exit(exc)


def write_params(folder: Path, overrides: Sequence[str] = (), source: Path | None = PARAMS) -> Path:
    """`source` (the repository's params file; None: the one already in `folder`) as
    folder/params.yaml with `overrides` applied, checked as the stages check it; an error names
    the file as the user knows it (without `folder`)."""
    from pipeline.config.commands.params_doc import set_in_file
    from pipeline.errors import ConfigError

    target = folder / "params.yaml"
    if source is not None:
        shutil.copyfile(source, target)
    try:
        set_in_file(target, list(overrides))
    except ConfigError as exc:
        _config_exit(exc, hide=folder)
    return target
