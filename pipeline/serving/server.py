"""`pipeline serve DATASET`: MLflow's own model server (`mlflow models serve`) on a registered
model's alias or version, from the tracking store in force, with the flags a user would have
to remember: the local environment (the project's, or the container's), one worker, a port
that is free."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Optional

from pipeline.errors import DataError
from pipeline.runtime.processes import check_port
from pipeline.serving import registry
from pipeline.tracking import probe, store


def command(model_uri: str, host: str, port: int, workers: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "mlflow",
        "models",
        "serve",
        "-m",
        model_uri,
        "--env-manager",
        "local",
        "-h",
        host,
        "-p",
        str(port),
        "--workers",
        str(workers),
    ]


def resolve(dataset: str, alias: str, version: Optional[int], metric: str) -> tuple[str, str]:
    """(model URI, what it is) for `dataset`'s `version`, else its `alias`: a ConfigError when
    there is no such version, a DataError naming the store when no version has the alias."""
    if version is not None:
        return f"models:/{dataset}/{version}", registry.version(dataset, version, metric).describe(metric)
    found = registry.by_alias(dataset, alias, metric)
    if found is None:
        hint = f"`pipeline promote {dataset}`" if alias == registry.CHAMPION else f"set the alias {alias!r}"
        raise DataError(
            f"{dataset}: no version has the alias {alias!r} in {store.registry_uri()}: {hint} first "
            f"(or serve a version: --version N)"
        )
    return f"models:/{dataset}@{alias}", found.describe(metric)


def serve(
    dataset: str,
    alias: str,
    version: Optional[int],
    metric: str,
    host: str,
    port: int,
    workers: int,
    echo: Callable[[str], None],
) -> None:
    """Replace this process with the model server (signals and exit code are its own)."""
    uri = store.tracking_uri()
    probe.check_tracking(uri)
    model_uri, what = resolve(dataset, alias, version, metric)
    check_port(host, port, "the model")
    echo(f"{model_uri}, {what}: http://{host}:{port}/invocations (from {uri}); Ctrl+C stops it")
    sys.stdout.flush()
    # MLflow starts `uvicorn` by name: this environment's, also when its bin folder is not on PATH
    path = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
    # quiet: no progress bars while the model downloads, no line per request (uvicorn's access
    # log; UVICORN_ACCESS_LOG=true in the environment brings it back), TensorFlow's errors only
    env = {
        "UVICORN_ACCESS_LOG": "false",
        "TF_CPP_MIN_LOG_LEVEL": "2",
        **os.environ,
        "MLFLOW_TRACKING_URI": uri,
        "PATH": path,
        "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false",
    }
    args = command(model_uri, host, port, workers)
    os.execve(args[0], args, env)
