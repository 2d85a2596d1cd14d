"""What a user reads on the terminal: one format, three levels, and the upstream noise kept out.

`pipeline -q` shows warnings and errors only; plain `pipeline` adds what each stage did and its
figures; `pipeline -v` adds details, and everything TensorFlow and MLflow say that a normal
run hides (TensorFlow's start-up lines and known-harmless warnings, listed in NATIVE_NOISE).
Messages go to stderr as `message`, `warning: message`, `error: message`; a stage's result
line goes to stdout (`log.result`).
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import sys
import threading
import traceback

import click

log = logging.getLogger("pipeline")

# C++ logs (TF_CPP_MIN_LOG_LEVEL): 2 hides TensorFlow's INFO and WARNING lines once its
# logging has started.
TF_CPP_QUIET, TF_CPP_VERBOSE = "2", "0"

# What TensorFlow's C++ side writes to stderr before its log level applies (tensorflow#100442:
# TF_CPP_MIN_LOG_LEVEL does not silence them), on every start of a process: a line in absl's
# or TensorFlow's log format ("I0000 00:00:17.. 1234 file.cc:31] text", or
# "2025-01-01 10:00:00.123: I file.cc:31] text"). INFO lines are dropped; warnings and errors
# only when they are listed here; anything else passes.
_NATIVE_LOG = re.compile(r"^(?:([IWEF])\d{4} [\d:.]+ +\d+ |[\d-]+ [\d:.]+: ([IWEF]) )\S+:\d+\] (.*)")
NATIVE_NOISE = re.compile(
    "|".join(
        (
            r"failed call to cuInit",  # a host without an NVIDIA driver
            r"Unable to register cu\w+ factory",  # CUDA plugins registered twice
            r"TF-TRT Warning: Could not find TensorRT",
        )
    )
)
_ABSL_PREAMBLE = "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"


def native_noise(line: str) -> bool:
    """Whether a line TensorFlow's C++ side wrote to stderr is known noise (see NATIVE_NOISE)."""
    if line.startswith(_ABSL_PREAMBLE):
        return True
    found = _NATIVE_LOG.match(line)
    if not found:
        return False
    level = found.group(1) or found.group(2)
    return level == "I" or bool(NATIVE_NOISE.search(found.group(3)))


_FILTERING = False  # stderr already goes through the filter


def filter_native_stderr() -> None:
    """From now on, pass what C++ libraries write to stderr (file descriptor 2) through
    `native_noise`, line by line. Python's own stderr (logging, click, progress bars) keeps
    writing to the terminal directly, so that it is still a terminal to them."""
    global _FILTERING
    if _FILTERING:
        return
    _FILTERING = True
    sys.stderr.flush()
    terminal = os.dup(2)
    sys.stderr = open(terminal, "w", buffering=1, encoding=sys.stderr.encoding, errors=sys.stderr.errors, closefd=False)
    for handler in log.handlers:
        if isinstance(handler, logging.StreamHandler):
            handler.setStream(sys.stderr)
    read, write = os.pipe()
    os.dup2(write, 2)
    os.close(write)

    def forward():
        with open(read, "rb", closefd=True) as lines:
            for raw in lines:
                if not native_noise(raw.decode(errors="replace")):
                    os.write(terminal, raw)

    thread = threading.Thread(target=forward, name="native-stderr", daemon=True)
    thread.start()

    def finish():
        # fd 2 back to the terminal: the pipe closes, and the thread writes what is left.
        os.dup2(terminal, 2)
        thread.join(timeout=5)

    atexit.register(finish)


class _Format(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        text = record.getMessage()
        if record.levelno >= logging.WARNING:
            text = f"{record.levelname.lower()}: {text}"
        if record.exc_info and record.levelno >= logging.ERROR:
            text += "\n" + self.formatException(record.exc_info)
        return text


def configure(verbosity: int) -> None:
    """-1 quiet, 0 normal, 1 verbose. Call before TensorFlow is imported (its C++ logging reads
    the environment once)."""
    level = {-1: logging.WARNING, 0: logging.INFO}.get(verbosity, logging.DEBUG)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Format())
    log.handlers[:] = [handler]
    log.setLevel(level)
    log.propagate = False
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", TF_CPP_VERBOSE if verbosity > 0 else TF_CPP_QUIET)
    if verbosity > 0:
        return
    # MLflow's INFO lines (creating tables, creating an experiment) on a run's first record
    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")
    filter_native_stderr()
    # TensorFlow's and absl's Python loggers print warnings a run cannot act on (retracing
    # notes, deprecations inside TensorFlow itself).
    for name in ("tensorflow", "absl", "h5py"):
        logging.getLogger(name).setLevel(logging.ERROR)


def verbosity() -> int:
    """What `configure` was given (-1, 0 or 1), for a process this one starts."""
    return {logging.WARNING: -1, logging.INFO: 0}.get(log.level, 1)


def one_line(text: str) -> str:
    """A message on one line: a library's multi-line message folded, spaces collapsed."""
    return " ".join(str(text).split())


def fail(message: str, code: int, trace: bool = False) -> int:
    """Print `error: message` (one line; with -v and `trace`, the traceback of the exception
    being handled first) and return `code`."""
    if not log.handlers:  # failed before the group's options were read
        configure(0)
    if trace and log.isEnabledFor(logging.DEBUG):
        log.debug("%s", traceback.format_exc().rstrip())
    log.error("%s", one_line(message))
    return code


def shows_progress() -> bool:
    """Whether per-epoch progress belongs on the terminal (not under -q)."""
    return log.isEnabledFor(logging.INFO)


def result(line: str) -> None:
    """A stage's result: what it did and the figures that matter (stdout; `-q` hides it)."""
    if log.isEnabledFor(logging.INFO):
        click.echo(line)
