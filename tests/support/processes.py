"""Fresh processes with a clean environment: `pipeline` commands, Python code, git and dvc, a
command on a pseudo-terminal; what a finished child printed, or why it printed nothing."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from support.project import ROOT

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


# the outputs each stage that reads a model folder must be given, and the names the tests give them
STAGE_OUTPUTS = {
    "train": {"history": "h.csv", "summary": "s.json", "curves": "c.png"},
    "evaluate": {"metrics": "m.json", "per_class": "p.csv", "confusion": "c.csv", "confusion_png": "cm.png"},
}


def train_args(dataset: str = "reuters", data="prepared", model_dir="model", **more) -> list[str]:
    """`pipeline train`'s arguments (`train` first) with the outputs it must be given
    (STAGE_OUTPUTS unless `more` names them), and `more`'s options: `backup_dir="backup"` is
    `--backup-dir backup`."""
    return _stage_args("train", dataset, data, model_dir, more)


def evaluate_args(dataset: str = "reuters", data="prepared", model_dir="model", **more) -> list[str]:
    """`pipeline evaluate`'s arguments (`evaluate` first), as `train_args` makes the train stage's."""
    return _stage_args("evaluate", dataset, data, model_dir, more)


def _stage_args(stage: str, dataset: str, data, model_dir, more: dict) -> list[str]:
    options = {"data": data, "model_dir": model_dir, **STAGE_OUTPUTS[stage], **more}
    return [stage, dataset] + [
        part for key, value in options.items() for part in (f"--{key.replace('_', '-')}", str(value))
    ]


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
