"""`pipeline ui` (pipeline/commands/ui.py): MLflow's UI on the project's store, served until
Ctrl+C; a tracking server's own URL; a port another program holds, or a store that cannot be
opened, is one line before any URL."""

import os
import socket

from support.processes import run_pipeline, subprocess_env
from support.servers import free_ports


def test_ui_serves_the_projects_store_and_prints_its_url(tmp_path):
    import signal
    import subprocess
    import sys
    import time
    import urllib.request

    (port,) = free_ports(1)
    # Ctrl+C as a terminal sends it: a suite started in the background (`make test &`, a CI
    # runner) ignores SIGINT, and a child inherits that, so the UI would never see it
    proc = subprocess.Popen(
        [sys.executable, "-m", "pipeline", "ui", "--port", str(port)],
        cwd=tmp_path,
        env=subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert proc.stdout is not None and proc.stderr is not None  # both PIPE
    try:
        first = proc.stdout.readline().strip()
        assert first == (
            f"MLflow UI: http://127.0.0.1:{port} (runs in sqlite:///{tmp_path / 'mlflow.db'}); Ctrl+C stops it"
        )
        deadline = time.time() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                    assert r.status == 200
                break
            except OSError:
                assert proc.poll() is None and time.time() < deadline, proc.stderr.read()
                time.sleep(0.5)
        assert (tmp_path / "mlflow.db").is_file()
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=300)  # a hang guard, not a time limit: a loaded host stops the server slowly
    assert proc.stderr.read().strip() == ""  # quiet: no access log, no notices


def test_ui_with_a_tracking_server_prints_its_url(tmp_path):
    result = run_pipeline("ui", cwd=tmp_path, env=subprocess_env(MLFLOW_TRACKING_URI="http://127.0.0.1:5999"))
    assert result.returncode == 0
    assert result.stdout.strip() == "MLflow UI: http://127.0.0.1:5999 (the tracking server's own)"


def test_a_port_another_program_holds_is_one_line_and_no_url(tmp_path):
    (port,) = free_ports(1)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", port))
        holder.listen()
        result = run_pipeline("ui", "--port", port, cwd=tmp_path)
    assert result.returncode == 1
    assert result.stdout == ""  # no URL that would show the other program
    assert result.stderr == (
        f"error: 127.0.0.1:{port}: cannot serve the UI there (Address already in use); "
        "stop what holds it, or pick another port with --port\n"
    )


def test_a_store_that_cannot_be_opened_is_one_line_and_no_url(tmp_path):
    (tmp_path / "mlflow.db").write_text("notes, not a database\n")
    result = run_pipeline("ui", "--port", free_ports(1)[0], cwd=tmp_path)
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr == (
        f"error: sqlite:///{tmp_path / 'mlflow.db'}: {tmp_path / 'mlflow.db'} is not an MLflow "
        "store (file is not a database); set MLFLOW_TRACKING_URI to the store that holds the "
        "runs, or move the file away\n"
    )
