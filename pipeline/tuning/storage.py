"""Where a study of `pipeline tune` lives: a journal file (beside mlflow.db by default, or a path)
for the workers of one host, or a database (SQLAlchemy's URL; psycopg 3 for PostgreSQL) for
several; the URL checked before any driver is asked, whether a storage is there to read before
Optuna makes one, and the storage opened with the heartbeat that lets a dead worker's trial be
failed and retried (Optuna gives it to its database storage only). No TensorFlow here."""

from __future__ import annotations

import importlib.util
import logging
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from pipeline.config.keys.schema import TuneConfig

from pipeline import log
from pipeline.errors import ConfigError, StudyError
from pipeline.tracking import store

JOURNAL_NAME = "optuna.journal"


def default_storage() -> str:
    """optuna.journal beside mlflow.db (the sqlite store in force), else in the repository root."""
    path = store.sqlite_path(store.tracking_uri())
    folder = path.parent if path is not None else store.repo_root()
    return str(folder / JOURNAL_NAME)


def is_database(url: str) -> bool:
    """A SQLAlchemy URL (postgresql://, mysql://, sqlite:///...) rather than a journal file."""
    return "://" in url and not url.startswith("file://")


def shown(url: str) -> str:
    """A storage URL with its password masked, for messages and tags."""
    if not is_database(url):
        return url
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - not a URL SQLAlchemy reads: opening it says why
        return url


def quiet_optuna():
    """Optuna, imported with its notices off: its INFO lines, and the warnings that the parts
    used here (the journal file, the heartbeat, its retry; asking for trials while keeping a
    heartbeat, which the workers do themselves) are "experimental" in its words."""
    import optuna

    optuna.logging.set_verbosity(logging.WARNING)
    optuna.logging.disable_default_handler()
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used with Study.optimize")
    return optuna


def database_url(url: str) -> str:
    """The URL SQLAlchemy opens: a postgresql:// one with psycopg 3 (the `postgres` extra) as its
    driver, which SQLAlchemy takes by default only from 2.1 (before, psycopg2); ConfigError
    when psycopg is not installed."""
    if not url.startswith(("postgresql://", "postgresql+psycopg://")):
        return url

    if importlib.util.find_spec("psycopg") is None:
        raise ConfigError(
            f"{shown(url)}: a study in PostgreSQL needs psycopg, which is not installed: "
            f"install pipeline[postgres] (make setup does)"
        )
    return "postgresql+psycopg://" + url.split("://", 1)[1]


# The storages a study can live in: a journal file (a path, or file://PATH) for the workers of
# one host, a database for several (SQLAlchemy's URL; psycopg 3 for PostgreSQL).
STORAGE_SCHEMES = ("file", "sqlite", "postgresql", "postgresql+psycopg")


def check_storage_url(url: str) -> None:
    """A ConfigError (usage: exit 2) for a storage URL of a scheme no study can live in, naming
    the ones that work, before any driver or server is asked."""
    if "://" not in url:
        return
    scheme = url.split("://", 1)[0].lower()
    if scheme not in STORAGE_SCHEMES:
        raise ConfigError(
            f"{shown(url)}: a study cannot live in a {scheme}:// storage: expected a journal file "
            f"(a path, or file://PATH), sqlite:///PATH or postgresql://USER@HOST/DATABASE"
        )


def holds_studies(url: str) -> bool:
    """Whether there is a storage at `url` to read studies from (a journal file, a database with
    Optuna's tables), found without making one: opening a storage with Optuna makes the file or
    the tables when they are not there. StudyError when the database cannot be reached."""
    check_storage_url(url)
    if not is_database(url):
        return Path(url.removeprefix("file://")).is_file()
    from sqlalchemy import create_engine, inspect
    from sqlalchemy.engine import make_url

    engine_url = database_url(url)
    try:
        if make_url(engine_url).get_backend_name() == "sqlite":  # connecting makes the file
            database = make_url(engine_url).database
            if not database or not Path(database).is_file():
                return False
        engine = create_engine(engine_url, **_engine_kwargs(url))
        try:
            with engine.connect() as connection:
                return inspect(connection).has_table("studies")
        finally:
            engine.dispose()
    except Exception as exc:  # SQLAlchemy's or the driver's: unreachable, refused, unknown dialect
        raise _cannot_open(url, exc) from None


def _engine_kwargs(url: str) -> dict:
    return {"connect_args": {"connect_timeout": 10}} if url.startswith("postgres") else {}


def _cannot_open(url: str, exc: Exception) -> StudyError:
    reason = " ".join(str(getattr(exc, "orig", None) or exc).split())[:300]
    return StudyError(f"{shown(url)}: cannot open the study's storage: {reason}")


def open_storage(url: str, cfg: TuneConfig, on_lost: Optional[Callable] = None):
    """Optuna's storage at `url`, with a heartbeat every cfg.heartbeat_seconds and the trials of
    dead workers retried cfg.retries times (`on_lost(trial)` first, in the worker that notices a
    silent one: what the caller keeps of a trial elsewhere, ended); StudyError when it cannot be
    opened, ConfigError when its scheme is none a study can live in or its driver is not
    installed. Opening makes the journal file, or Optuna's tables in the database, when they are
    not there yet."""
    check_storage_url(url)
    engine_url = database_url(url) if is_database(url) else url
    quiet_optuna()
    from optuna.storages import RDBStorage

    retry = _on_stale(cfg.retries, on_lost)
    if not is_database(url):
        path = Path(url.removeprefix("file://"))
        if not path.parent.is_dir():
            raise StudyError(f"{url}: no folder {path.parent} for the study's journal file")
        return _journal_storage(path, cfg.heartbeat_seconds, retry)
    attempt = 1
    while True:
        try:
            return RDBStorage(
                engine_url,
                engine_kwargs=_engine_kwargs(url),
                heartbeat_interval=cfg.heartbeat_seconds,
                heartbeat_stale_trial_callback=retry,
            )
        except Exception as exc:  # SQLAlchemy's or the driver's: unreachable, refused, unknown dialect
            if attempt < MADE_AT_ONCE_ATTEMPTS and _made_at_once(exc):
                time.sleep(0.2 * attempt)
                attempt += 1
                continue
            raise _cannot_open(url, exc) from None


# Workers that open a fresh database together (a Slurm array's tasks) each find no tables, and
# each asks Optuna to make them: all but the first then fail on a table, type or row that
# "already exists" by then. Opened again, the database has them all.
MADE_AT_ONCE_ATTEMPTS = 5


def _made_at_once(exc: Exception) -> bool:
    """Whether opening failed because another worker made Optuna's tables at the same moment."""
    from sqlalchemy.exc import IntegrityError, ProgrammingError

    return isinstance(exc, (IntegrityError, ProgrammingError)) and "already exists" in str(exc)


def study_names(storage) -> str:
    """The names of the studies in an opened storage (None: no storage yet), for messages."""
    names = [summary.study_name for summary in storage.get_all_studies()] if storage is not None else []
    return ", ".join(names) or "none"


def _on_stale(retries: int, on_lost: Optional[Callable]):
    """What happens to a trial whose worker went silent, in the worker that notices: `on_lost`
    (the study's: its MLflow run ends FAILED), and Optuna queues the same params again (up to
    `retries` times)."""
    from optuna.storages import RetryHeartbeatStaleTrialCallback

    retry = RetryHeartbeatStaleTrialCallback(max_retry=retries)

    def on_stale(study, trial) -> None:
        if on_lost is not None:
            on_lost(trial)
        retry(study, trial)
        retried = RetryHeartbeatStaleTrialCallback.retry_history(trial)
        again = "queued again with the same params" if len(retried) < retries else f"not retried ({retries} retries)"
        log.log.warning("trial %d: its worker went silent; failed, %s", trial.number, again)

    return on_stale


def _journal_storage(path: Path, interval: int, retry):
    """A journal file storage with Optuna's heartbeat, which Optuna gives its database storage
    only: each running trial records the time in its system attributes; one silent for twice
    the interval is stale, failed and retried, as in RDBStorage."""
    from optuna.storages import JournalStorage
    from optuna.storages._heartbeat import BaseHeartbeat  # the interface RDBStorage implements
    from optuna.storages.journal import JournalFileBackend
    from optuna.trial import TrialState

    class JournalWithHeartbeat(JournalStorage, BaseHeartbeat):
        def record_heartbeat(self, trial_id: int) -> None:
            self.set_trial_system_attr(trial_id, "heartbeat", time.time())

        def _get_stale_trial_ids(self, study_id: int) -> list[int]:
            now = time.time()
            return [
                t._trial_id
                for t in self.get_all_trials(study_id, deepcopy=False, states=(TrialState.RUNNING,))
                if now - t.system_attrs.get("heartbeat", t.datetime_start.timestamp() if t.datetime_start else now)
                > 2 * interval
            ]

        def get_heartbeat_interval(self) -> int:
            return interval

        def get_heartbeat_stale_trial_callback(self):
            return retry

    try:
        return JournalWithHeartbeat(JournalFileBackend(str(path)))
    except (OSError, ValueError, KeyError) as exc:
        raise StudyError(f"{path}: cannot read it as an Optuna journal: {exc}") from None
