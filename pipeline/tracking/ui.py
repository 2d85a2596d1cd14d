"""`pipeline ui`: MLflow's UI on the project's runs, served by an `mlflow server` this process
starts and supervises.

The port is bound here first, as the server will bind it: a port another program holds is one
line naming it (exit 1) before any URL is printed, instead of a URL that shows that other
program. The store is checked as every command checks it (pipeline.tracking.probe). A server
that stops on its own is a failure (exit 1, its own output above), not a clean exit.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable

from pipeline.errors import ServerError
from pipeline.runtime.processes import check_port
from pipeline.tracking import probe, store


def serve(host: str, port: int, echo: Callable[[str], None]) -> int:
    """Serve the UI until Ctrl+C (or SIGTERM); the exit code. A tracking server already serves
    its own UI: its URL is printed and nothing is started."""
    uri = store.tracking_uri()
    if uri.startswith(("http://", "https://")):
        echo(f"MLflow UI: {uri} (the tracking server's own)")
        return 0
    probe.check_tracking(uri)
    check_port(host, port)
    echo(f"MLflow UI: http://{host}:{port} (runs in {uri}); Ctrl+C stops it")
    # The experiments open on MLflow's GenAI overview unless the browser's "Model training"
    # switch is on: these links open their runs table either way.
    for name, url in store.runs_pages(f"http://{host}:{port}", uri):
        echo(f"  {name} runs: {url}")
    env = {
        **os.environ,
        "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",  # ~1 GB of job runners
        "MLFLOW_LOGGING_LEVEL": "WARNING",
        "PYTHONWARNINGS": "ignore",
    }
    args = [
        sys.executable,
        "-m",
        "mlflow",
        "server",
        "--backend-store-uri",
        uri,
        "--registry-store-uri",
        uri,
        "--host",
        host,
        "--port",
        str(port),
        "--workers",
        "1",
        "--uvicorn-opts",
        "--no-access-log --log-level warning",
    ]
    sys.stdout.flush()  # the URL before the server's own output
    # Its own session: Ctrl+C reaches this process only, which stops the server cleanly
    # (uvicorn interrupted mid-request prints a traceback).
    server = subprocess.Popen(args, env=env, stderr=subprocess.PIPE, text=True, start_new_session=True)

    def stop(*_):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)  # `kill`, or a supervisor, stops the server too
    try:
        for line in server.stderr or ():
            if not line.startswith("[MLflow] Security middleware enabled"):  # a notice on every start
                sys.stderr.write(line)
        code = server.wait()
    except KeyboardInterrupt:
        server.terminate()
        server.wait(timeout=30)
        return 0
    # not stopped by the user: whatever the server's own exit code, the UI is gone
    raise ServerError(f"the MLflow server on {host}:{port} stopped (exit code {code}); its output is above")
