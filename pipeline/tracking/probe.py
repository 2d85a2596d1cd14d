"""Whether the tracking store in force can take a run, asked before any work: MLflow itself
retries a server that does not answer for minutes before a traceback, and reports a store it
cannot open as an unexpected failure."""

from __future__ import annotations

import base64
import contextlib
import os
import sqlite3
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Optional

from pipeline.errors import TrackingError
from pipeline.tracking import store


def _check_sqlite_file(uri: str, path: Path) -> None:
    """TrackingError when the existing file `path` is not a SQLite database (read, not written)."""
    try:
        with contextlib.closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=30)) as db:
            db.execute("SELECT name FROM sqlite_master LIMIT 1").fetchall()
    except sqlite3.OperationalError:
        return  # busy with another process's migration, or unreadable: opening it says more
    except sqlite3.DatabaseError as exc:  # not a database, or a damaged one
        raise TrackingError(
            f"{uri}: {path} is not an MLflow store ({exc}); set MLFLOW_TRACKING_URI to the "
            "store that holds the runs, or move the file away"
        ) from None


def _open_store(uri: str) -> str:
    """A store that is neither a sqlite file nor a server (a database server's URI, a folder,
    or a scheme MLflow does not know), opened as MLflow opens it: what MLflow raises on the
    way becomes one TrackingError naming the store, not an unexpected failure later."""
    from mlflow.tracking._tracking_service.utils import _get_store

    try:
        _get_store(uri)
    except Exception as exc:  # MLflow's, SQLAlchemy's or a driver's: the store cannot be opened
        reason = " ".join(str(exc).split()).split(". ")[0].rstrip(".")
        raise TrackingError(
            f"{uri}: cannot be opened as an MLflow tracking store ({reason}); set "
            "MLFLOW_TRACKING_URI to a sqlite:/// file or a tracking server's URL"
        ) from None
    return f"{uri} (opened)"


def check_tracking(uri: Optional[str] = None, timeout: float = 5.0) -> str:
    """Whether the tracking store can take a run: a one-line description, or TrackingError.

    For a server: /health, then one query that reaches its database, with the credentials
    MLflow would send. MLflow itself retries a dead server for minutes before a traceback.
    """
    uri = uri or store.tracking_uri()
    store.check_scheme(uri)
    scheme = urllib.parse.urlsplit(uri).scheme
    if scheme == "sqlite":
        return _check_sqlite(uri)
    if scheme not in ("http", "https"):
        return _open_store(uri)
    base = uri.rstrip("/")
    _check_health(base, timeout)
    _check_query(base, timeout)
    return f"{base} answers; its backend store too"


def _check_sqlite(uri: str) -> str:
    path = store.sqlite_path(uri)
    assert path is not None  # a sqlite URI has a path
    folder = path.parent
    if not os.access(folder if folder.exists() else folder.parent, os.W_OK):
        raise TrackingError(
            f"{uri}: {folder} is not writable; run where you can write, or set MLFLOW_TRACKING_URI to a tracking server"
        )
    if path.exists():
        _check_sqlite_file(uri, path)
    return f"{uri} ({'exists' if path.exists() else 'made by the first run'})"


def _check_health(base: str, timeout: float) -> None:
    try:
        urllib.request.urlopen(f"{base}/health", timeout=timeout).close()
    except urllib.error.HTTPError as exc:
        raise TrackingError(
            f"{base}/health answered HTTP {exc.code}: not an MLflow server; check MLFLOW_TRACKING_URI"
        ) from None
    except OSError as exc:
        reason = getattr(exc, "reason", exc)
        raise TrackingError(
            f"MLflow tracking server {base} does not answer ({reason}); start it, or "
            "set MLFLOW_TRACKING_URI to one that runs (unset: mlflow.db here)"
        ) from None


def _check_query(base: str, timeout: float) -> None:
    """One query that reaches the server's database, with the credentials MLflow would send."""
    headers = {}
    user, password = os.environ.get("MLFLOW_TRACKING_USERNAME"), os.environ.get("MLFLOW_TRACKING_PASSWORD")
    if user and password:
        headers["Authorization"] = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
    elif os.environ.get("MLFLOW_TRACKING_TOKEN"):
        headers["Authorization"] = f"Bearer {os.environ['MLFLOW_TRACKING_TOKEN']}"
    query = urllib.request.Request(f"{base}/api/2.0/mlflow/experiments/search?max_results=1", headers=headers)
    try:
        urllib.request.urlopen(query, timeout=max(timeout, 15)).close()
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            who = f"user {user!r} was refused" if headers else "no credentials were given"
            raise TrackingError(
                f"{base} requires a login and {who} (HTTP {exc.code}); set "
                "MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD"
            ) from None
        raise TrackingError(
            f"{base} answers but cannot query its backend store (HTTP {exc.code}); check "
            "the server's database (with docker/compose.yaml: the db service)"
        ) from None
    except OSError as exc:
        raise TrackingError(
            f"{base} answers /health but not a query ({getattr(exc, 'reason', exc)}); "
            "check the server's database and logs"
        ) from None
