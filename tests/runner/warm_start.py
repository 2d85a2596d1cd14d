"""Warm starts: a `pipeline` process of the suite that begins with TensorFlow, Keras and MLflow
already imported, forked from a server that imported them once, instead of importing them itself.

Most of the suite's work is `pipeline` processes (the stages `dvc` runs, the commands the tests
run), and most of what each costs on fixture data is importing TensorFlow, Keras and MLflow
(docs/testing.md, "Where the time goes"). While a session runs, a `.pth` line in the environment's
site-packages runs runner/warm_client.py at the start of every Python process of the environment
(`client`):

- a process that is `python -m pipeline ARGS` (or `-m pipeline.MODULE`), the `pipeline` script
  or a script of tests/workers, not verbose, not on a terminal, with no descriptors but 0, 1, 2, as
  the session's user, in its namespaces and cgroup (`context`), asks the server for its
  environment (the variables read at import time, the interpreter, the resource limits:
  `identity`) to fork a process that runs its command;
- the server's child takes the client's arguments, working directory, environment, umask,
  standard streams (passed as descriptors) and sys.path (its path0 and PYTHONPATH's folders,
  when they hold nothing by a name the server's imports looked for: `_shadowed`), imports the
  project's code from there, runs the command as `python` would run it (`__main__`,
  `sys.argv`, exit code, uncaught exceptions, atexit) and exits; the client exits with its
  status (a signal's included) and
  passes on the signals it receives; a client that is killed takes the child with it;
- a process that does not qualify, or whose environment has no server yet, starts as usual: the
  second such start of an environment starts its server (runner/warm_server.py's `serve`) in
  the background.

What a test checks of a process's own start (its imports, what it prints while it starts, its
signals and memory) is checked on a process that started as usual: such tests are marked
`cold_start` (runner/plugin.py takes the variable out of their environment). This module is the
session's side: runner/plugin.py starts the warm starts (`start`) and stops them (`stop`);
`PIPELINE_TEST_WARM=` (empty) turns them off for a whole run.
"""

from __future__ import annotations

import os
import signal

from runner.warm_client import PTH, VARIABLE


def pth_line() -> str:
    """The `.pth` line that runs runner/warm_client.py's `client` at every start of the
    environment's Python (the census's, runner/census.py, for that file)."""
    from pathlib import Path

    from runner import census

    return census.pth_line(Path(__file__).with_name("warm_client.py"), VARIABLE, "warm_start_hook")


def start(site_packages: str) -> str:
    """The `.pth` line in place and the session's folder made; the caller sets VARIABLE to it and
    CONTEXT to `context()` (runner/warm_client.py's) in the session's environment, which its processes inherit."""
    import tempfile

    with open(os.path.join(site_packages, PTH), "w", encoding="utf-8") as pth:
        pth.write(pth_line())
    return tempfile.mkdtemp(prefix="pipeline-warm-")


def stop(folder: str, site_packages: str) -> int:
    """The `.pth` line removed, the servers stopped, the folder removed; how many servers ran."""
    try:
        os.unlink(os.path.join(site_packages, PTH))
    except FileNotFoundError:
        pass
    return stop_servers(folder)


def stop_servers(folder: str) -> int:
    """The folder's servers stopped and the folder removed; how many servers ran."""
    import shutil

    servers = 0
    for entry in os.listdir(folder) if os.path.isdir(folder) else ():
        if entry.endswith(".pid"):
            servers += 1
            try:
                with open(os.path.join(folder, entry), encoding="utf-8") as pid:
                    os.kill(int(pid.read()), signal.SIGTERM)
            except (OSError, ValueError):
                pass
    shutil.rmtree(folder, ignore_errors=True)
    return servers
