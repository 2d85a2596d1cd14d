"""Work in a process of its own, for the commands that need a fresh TensorFlow for each part of
it (TensorFlow fixes its devices once per process, and two strategies in one process collide):
`pipeline bench --replicas`, `pipeline selftest` and the workers of `pipeline tune`. The parent
hands the work its arguments as
JSON and reads its result back as JSON; the child runs under `pipeline`'s error boundary, at
the parent's verbosity."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn, Optional

from pipeline import errors, io, log
from pipeline.errors import ServerError
from pipeline.runtime import imports


def _command(module: str, spec: dict, out: Path) -> list[str]:
    return [sys.executable, "-m", module, json.dumps({**spec, "verbosity": log.verbosity()}), str(out)]


def run(module: str, spec: dict, out: Path) -> dict:
    """`python -m MODULE SPEC OUT` (the module's `serve`), and the result it wrote to `out`.
    When it failed, its `error:` line is on stderr already: SystemExit with its exit code."""
    code = subprocess.run(_command(module, spec, out), stdout=subprocess.DEVNULL).returncode
    if code:
        raise SystemExit(code)
    return json.loads(Path(out).read_text())


def run_many(module: str, specs: list[dict], env: Optional[dict] = None) -> list[int]:
    """One `python -m MODULE SPEC OUT` per spec, all at once, their output on this terminal;
    their exit codes, once all have ended (a failed one has said why on stderr)."""
    with tempfile.TemporaryDirectory(prefix="pipeline-") as folder:
        procs = [
            subprocess.Popen(_command(module, spec, Path(folder) / f"{i}.json"), env=env)
            for i, spec in enumerate(specs)
        ]
        try:
            return [proc.wait() for proc in procs]
        except KeyboardInterrupt:  # Ctrl+C reached the children too: let them end as they do
            for proc in procs:
                proc.wait()
            raise


def serve(work: Callable[[dict], dict]) -> NoReturn:
    """A child's whole life (its module's `__main__`): `work(spec)`, its result as JSON in OUT,
    every failure one `error:` line and an exit code (errors.report)."""
    spec = json.loads(sys.argv[1])
    log.configure(spec["verbosity"])
    imports.skip_keras_extras()
    sys.exit(errors.report(lambda: io.write_json(Path(sys.argv[2]), work(spec))))


def check_port(host: str, port: int, what: str = "the UI") -> None:
    """ServerError unless `host`:`port` can be bound now (released again at once), as the server
    binds it: with SO_REUSEADDR, so that a port left in TIME_WAIT by the last server is free."""
    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    except OSError as exc:
        raise ServerError(
            f"{host}:{port}: cannot serve {what} there ({exc.strerror or exc}); "
            "stop what holds it, or pick another port with --port"
        ) from None
