"""Helpers the tests share: fresh processes with a clean environment, a params file with
overrides, a pseudo-terminal, free ports. Fixtures live in conftest.py."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def subprocess_env(**extra) -> dict:
    env = dict(os.environ)
    env.update({"PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "2", "DVC_NO_ANALYTICS": "1",
                "CUDA_VISIBLE_DEVICES": "-1"})
    env.pop("PIPELINE_DATA_MIRROR", None)
    env.pop("MLFLOW_TRACKING_URI", None)
    env.update(extra)
    return env


def run_pipeline(*args, cwd=None, env=None, timeout=600):
    """`python -m pipeline ARGS` in a fresh process (each TF/distributed case gets its own)."""
    return subprocess.run([sys.executable, "-m", "pipeline", *map(str, args)], cwd=cwd or ROOT,
                          env=env or subprocess_env(), capture_output=True, text=True, timeout=timeout)


def run_python(code: str, cwd=None, env=None, timeout=600):
    return subprocess.run([sys.executable, "-c", code], cwd=cwd or ROOT, env=env or subprocess_env(),
                          capture_output=True, text=True, timeout=timeout)


def write_params(folder: Path, overrides: dict | None = None) -> Path:
    """Copy the shipped params.yaml into `folder`, with dotted-key overrides applied."""
    import yaml

    from pipeline.config import format_params

    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    for key, value in (overrides or {}).items():
        node = raw
        *parents, last = key.split(".")
        for part in parents:
            node = node[part]
        assert last in node, key
        node[last] = value
    path = Path(folder) / "params.yaml"
    path.write_text(format_params(raw))  # the shipped file's form: `dvc exp run -S` changes one line
    return path


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


def reuters_files_of(served: Path) -> list:
    """params' download.reuters.files with the sha256 of the fixtures in `served`, so that the
    real check runs on them."""
    import hashlib

    import yaml

    files = yaml.safe_load((ROOT / "params.yaml").read_text())["download"]["reuters"]["files"]
    for entry in files:
        entry["sha256"] = hashlib.sha256((Path(served) / Path(entry["url"]).name).read_bytes()).hexdigest()
    return files


def start_mlflow_server(root: Path, port: int, timeout: float = 120):
    """A real MLflow tracking server on 127.0.0.1:`port` (one worker, artifacts proxied), its
    store and artifacts in `root`; (process, URL) once /health answers."""
    import time
    import urllib.request

    log = open(Path(root) / "server.log", "a")
    proc = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port),
         "--workers", "1", "--backend-store-uri", f"sqlite:///{Path(root) / 'mlflow.db'}",
         "--artifacts-destination", str(Path(root) / "artifacts")],
        stdout=log, stderr=subprocess.STDOUT, env=subprocess_env(), start_new_session=True,
    )
    log.close()
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as r:
                if r.status == 200:
                    return proc, url
        except OSError:
            pass
        if proc.poll() is not None or time.time() > deadline:
            proc.kill()
            raise RuntimeError(f"mlflow server did not start: {(Path(root) / 'server.log').read_text()[-2000:]}")
        time.sleep(0.5)
