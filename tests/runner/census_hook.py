"""Run at the start of every Python process of the suite's environment while a session counts
(tests/runner/census.py writes the `.pth` line that runs it, and sets PIPELINE_TEST_CENSUS to a folder):
it writes to that folder, as JSON lines, when the process imports TensorFlow, each training it
starts (a call of `pipeline.training.trainer.train`, which both loops, the tuning trials and
the suite's worker cases go through) and, when it exits, its own CPU seconds. Each event says
when it happened and under which xdist worker (PYTEST_XDIST_WORKER, which a child process
inherits even through an environment a fixture copied long before), from which
tests/runner/census.py finds the test that worker was running then; and the test its environment
names (PYTEST_CURRENT_TEST), for a run without those times. Standard library
only, and nothing imported that the process would not import anyway: it runs in every
`pipeline`, `dvc` and MLflow process of the session."""

from __future__ import annotations

import atexit
import functools
import importlib.abc
import importlib.machinery
import json
import os
import resource
import sys
import time

FOLDER = os.environ.get("PIPELINE_TEST_CENSUS", "")
TRAINER = "pipeline.training.trainer"


def _test() -> str:
    current = os.environ.get("PYTEST_CURRENT_TEST", "")  # "tests/a/test_x.py::test_y (call)"
    return current.rsplit(" (", 1)[0] if current else "(the pytest processes)"


def record(event: str, **fields) -> None:
    where = {"test": _test(), "worker": os.environ.get("PYTEST_XDIST_WORKER", "master"), "time": time.time()}
    line = json.dumps({"event": event, "pid": os.getpid(), **where, **fields}) + "\n"
    try:  # one write of one line in append mode: lines of several processes never interleave
        with open(os.path.join(FOLDER, f"{os.getpid()}.jsonl"), "a", encoding="utf-8") as out:
            out.write(line)
    except OSError:  # the session's folder is gone: a process that outlived its session
        pass


class _Watcher(importlib.abc.MetaPathFinder):
    """Finds TensorFlow and the trainer as Python's own path finder does, with their loaders
    wrapped: the count is of modules executed, not of lookups (MLflow and Keras ask whether
    TensorFlow is installed, `importlib.util.find_spec`, without importing it)."""

    def find_spec(self, fullname, path, target=None):
        if fullname not in ("tensorflow", TRAINER):
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _CountingLoader(spec.loader)
        return spec


class _CountingLoader(importlib.abc.Loader):
    def __init__(self, loader):
        self.loader = loader

    def __getattr__(self, name):  # get_source, get_filename, ...: the file's own loader's
        return getattr(self.loader, name)

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        if module.__name__ == "tensorflow":
            record("tensorflow", argv=sys.argv[:3])
            self.loader.exec_module(module)
            return
        self.loader.exec_module(module)
        train = module.train

        @functools.wraps(train)
        def counted(*args, **kwargs):
            record("train")
            return train(*args, **kwargs)

        module.train = counted


def _exit() -> None:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    record("exit", tensorflow="tensorflow" in sys.modules, cpu=round(usage.ru_utime + usage.ru_stime, 2))


# once: site.py runs a `.pth` line once for each path of the site-packages folder (a venv's
# lib64 -> lib link makes two)
if FOLDER and not any(type(finder).__name__ == "_Watcher" for finder in sys.meta_path):
    sys.meta_path.insert(0, _Watcher())
    atexit.register(_exit)
