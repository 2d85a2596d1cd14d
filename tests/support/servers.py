"""Servers the tests start and wait for: free ports on 127.0.0.1, a real MLflow tracking
server, an empty PostgreSQL database, and the headless browser that visits their pages."""

import os
import subprocess
import sys
from pathlib import Path

from support.processes import subprocess_env

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
