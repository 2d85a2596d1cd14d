"""pipeline/tracking/ui.py's server, started and supervised without a real one (a stand-in for
its process): a tracking server's own URL and nothing started, whatever holds the port; the
command line of the `mlflow server` it starts on the project's store, a link to each experiment's
runs table, the server's start-up notice left out of what it passes on, Ctrl+C a clean stop and a
server that stops on its own a failure. A real server, through the command:
tests/commands/test_ui_command.py."""

import signal
import socket
import subprocess
import sys
from types import SimpleNamespace

import pytest
from support.tracking import forget_tracking_uri, use_sqlite

from pipeline.errors import ServerError
from pipeline.tracking import store, ui


class StandIn:
    """The server's process: the lines it writes on stderr, then its exit code (None: Ctrl+C
    while it serves). Each one started is in `started`."""

    started: list = []
    exit_code = None

    def __init__(self, args, env, **_):
        self.args, self.env = args, env
        StandIn.started.append(self)
        self.stderr = iter(["[MLflow] Security middleware enabled for the UI\n", "a line of its own\n"])
        self.terminated = False

    def wait(self, timeout=None):
        if self.terminated:
            return -15
        if StandIn.exit_code is None:
            raise KeyboardInterrupt
        return StandIn.exit_code

    def terminate(self):
        self.terminated = True


@pytest.fixture
def stand_in(tmp_path, monkeypatch):
    """The stand-in for the server's process, and a sqlite store here (its URI)."""
    monkeypatch.setattr(ui, "subprocess", SimpleNamespace(Popen=StandIn, PIPE=subprocess.PIPE))
    # the suite's own SIGTERM handling stays
    monkeypatch.setattr(ui, "signal", SimpleNamespace(signal=lambda *_: None, SIGTERM=signal.SIGTERM))
    monkeypatch.setattr(StandIn, "started", [])
    yield use_sqlite(tmp_path, monkeypatch)
    forget_tracking_uri()


def test_a_tracking_server_serves_its_own_ui_and_nothing_is_started(monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5999")
    monkeypatch.setattr(ui, "subprocess", None)  # nothing may start
    lines: list[str] = []
    with socket.socket() as holder:  # the port it would serve on, held: nothing binds it
        holder.bind(("127.0.0.1", 0))
        assert ui.serve("127.0.0.1", holder.getsockname()[1], lines.append) == 0
    assert lines == ["MLflow UI: http://127.0.0.1:5999 (the tracking server's own)"]


def test_the_server_on_the_store_its_links_and_ctrl_c(stand_in, capsys):
    from mlflow import MlflowClient

    uri = stand_in
    experiment = MlflowClient(uri).create_experiment("reuters")
    capsys.readouterr()  # MLflow's own lines as it made the store
    lines: list[str] = []
    assert ui.serve("127.0.0.1", 5123, lines.append) == 0
    assert lines == [
        f"MLflow UI: http://127.0.0.1:5123 (runs in {uri}); Ctrl+C stops it",
        f"  reuters runs: {store.RUNS_PAGE.format(base='http://127.0.0.1:5123', id=experiment)}",
    ]
    (server,) = StandIn.started
    assert server.terminated  # stopped by the Ctrl+C this process got (the server has its own session)
    args, env = server.args, server.env
    assert args[:4] == [sys.executable, "-m", "mlflow", "server"]
    assert dict(zip(args[4::2], args[5::2])) == {  # its options and their values
        "--backend-store-uri": uri,
        "--registry-store-uri": uri,
        "--host": "127.0.0.1",
        "--port": "5123",
        "--workers": "1",
        "--uvicorn-opts": "--no-access-log --log-level warning",
    }
    assert env["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] == "false" and env["MLFLOW_LOGGING_LEVEL"] == "WARNING"
    assert capsys.readouterr().err == "a line of its own\n"  # MLflow's notice on every start left out


def test_a_server_that_stops_on_its_own_is_a_failure(stand_in, monkeypatch):
    monkeypatch.setattr(StandIn, "exit_code", 3)
    with pytest.raises(ServerError, match=r"^the MLflow server on 127.0.0.1:5123 stopped \(exit code 3\); its output"):
        ui.serve("127.0.0.1", 5123, lambda line: None)


def test_a_port_another_program_holds_is_refused_before_the_url(tmp_path, monkeypatch):
    use_sqlite(tmp_path, monkeypatch)
    lines: list[str] = []
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        with pytest.raises(ServerError, match=r"cannot serve the UI there \(Address already in use\)"):
            ui.serve("127.0.0.1", holder.getsockname()[1], lines.append)
    assert lines == [] and not (tmp_path / "mlflow.db").exists()
