"""A study of `pipeline tune` in Optuna's storage: where it lives (a journal file beside mlflow.db,
or a database URL), its sampler and pruner, its creation by the first worker and its checks for
every other, the heartbeat that lets a dead worker's trial be retried, its counts and its best
trial as the `dvc exp run` line that reproduces it. No TensorFlow here."""

from __future__ import annotations

import importlib.util
import json
import logging
import shlex
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    import optuna

    from pipeline.config.schema import DatasetParams, TuneConfig

from pipeline import log
from pipeline.config import search_space
from pipeline.errors import ConfigError, StudyError
from pipeline.tracking import probe, store
from pipeline.tuning import study_runs

JOURNAL_NAME = "optuna.journal"
# What the study records about itself, so that every worker can check it trains the same search.
ATTRS = ("dataset", "space", "metric", "direction")
RUN_ATTR = "mlflow_run_id"
FINISHED_STATES = ("COMPLETE", "PRUNED")


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


def open_storage(url: str, cfg: TuneConfig):
    """Optuna's storage at `url`, with a heartbeat every cfg.heartbeat_seconds and the trials of
    dead workers retried cfg.retries times; StudyError when it cannot be opened, ConfigError
    when its scheme is none a study can live in or its driver is not installed. Opening makes
    the journal file, or Optuna's tables in the database, when they are not there yet."""
    check_storage_url(url)
    engine_url = database_url(url) if is_database(url) else url
    quiet_optuna()
    from optuna.storages import RDBStorage

    retry = _on_stale(cfg.retries)
    if not is_database(url):
        path = Path(url.removeprefix("file://"))
        if not path.parent.is_dir():
            raise StudyError(f"{url}: no folder {path.parent} for the study's journal file")
        return _journal_storage(path, cfg.heartbeat_seconds, retry)
    try:
        return RDBStorage(
            engine_url,
            engine_kwargs=_engine_kwargs(url),
            heartbeat_interval=cfg.heartbeat_seconds,
            heartbeat_stale_trial_callback=retry,
        )
    except Exception as exc:  # SQLAlchemy's or the driver's: unreachable, refused, unknown dialect
        raise _cannot_open(url, exc) from None


def study_names(storage) -> str:
    """The names of the studies in an opened storage (None: no storage yet), for messages."""
    names = [summary.study_name for summary in storage.get_all_studies()] if storage is not None else []
    return ", ".join(names) or "none"


def _on_stale(retries: int):
    """What happens to a trial whose worker went silent, in the worker that notices: its MLflow
    run ends FAILED, and Optuna queues the same params again (up to `retries` times)."""
    from optuna.storages import RetryHeartbeatStaleTrialCallback

    retry = RetryHeartbeatStaleTrialCallback(max_retry=retries)

    def on_stale(study, trial) -> None:
        if trial.user_attrs.get(RUN_ATTR):
            study_runs.TrialRun(trial.user_attrs[RUN_ATTR]).finish(
                "failed",
                epochs=len(trial.intermediate_values),
                value=None,
                metric="",
                reason="its worker stopped sending heartbeats (killed, or its host went down)",
            )
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


def sampler(cfg: TuneConfig):
    """TPE (or random) whose randomness is the study's seed plus the trial's number: the same
    trials on every run of one worker, and no two workers drawing the same start-up trials."""
    import optuna

    def make(seed):
        if cfg.sampler == "random":
            return optuna.samplers.RandomSampler(seed=seed)
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=cfg.startup_trials, constant_liar=True)

    class SeededPerTrial(optuna.samplers.BaseSampler):
        def __init__(self):
            self._current = make(cfg.seed)

        def before_trial(self, study, trial):
            self._current = make(cfg.seed + trial.number)
            self._current.before_trial(study, trial)

        def infer_relative_search_space(self, study, trial):
            return self._current.infer_relative_search_space(study, trial)

        def sample_relative(self, study, trial, space):
            return self._current.sample_relative(study, trial, space)

        def sample_independent(self, study, trial, name, distribution):
            return self._current.sample_independent(study, trial, name, distribution)

        def after_trial(self, study, trial, state, values):
            self._current.after_trial(study, trial, state, values)

    return SeededPerTrial()


def pruner(cfg: TuneConfig, epochs: int):
    import optuna

    if cfg.pruner == "median":  # from the second epoch (steps are 1-based epochs), after startup_trials
        return optuna.pruners.MedianPruner(n_startup_trials=cfg.startup_trials, n_warmup_steps=2)
    if cfg.pruner == "hyperband":
        return optuna.pruners.HyperbandPruner(min_resource=1, max_resource=max(epochs, 2))
    return optuna.pruners.NopPruner()


def identity(params: DatasetParams, name: str) -> dict:
    """What a study must agree on with every worker that joins it: the search (dataset, space,
    metric, direction) and the name it was created under (a study copied or renamed in its
    storage is another one)."""
    cfg = params.tune
    return {
        "dataset": params.dataset,
        "space": search_space.as_json(cfg.space),
        "metric": cfg.metric,
        "direction": cfg.direction,
        "study": name,
    }


@dataclass(frozen=True)
class Recorded:
    """What a storage holds of a study, read without loading or creating it."""

    directions: tuple[str, ...]  # Optuna's: maximize, minimize
    user_attrs: dict
    trials: int


def read_study(storage, name: str) -> Optional[Recorded]:
    """The study `name` as the opened storage holds it, or None when it holds no such study."""
    try:
        study_id = storage.get_study_id_from_name(name)
    except KeyError:
        return None
    return Recorded(
        tuple(d.name.lower() for d in storage.get_study_directions(study_id)),
        dict(storage.get_study_user_attrs(study_id)),
        storage.get_n_trials(study_id),
    )


def check_same_search(found: Recorded, params: DatasetParams, name: str, url: str, *, settled: bool) -> None:
    """A ConfigError (exit 2) unless the study `name` as read from `url` is the search the
    params in force ask for, whoever made it: Optuna's own direction first (a study made by a
    script or a teammate's minimizes what this one maximizes: its worst trial would be reported
    as the best), then what the project records in a study it creates. `settled`: its creator
    has had time to record that; a study that still records none of it was not made by
    `pipeline tune`. Called before anything is written to the study."""
    mine = identity(params, name)
    fix = f"name a new study with --study, or put tune.{params.dataset}.{{key}} back"
    (direction,) = found.directions if len(found.directions) == 1 else ("several",)
    if direction != mine["direction"]:
        raise ConfigError(
            f"study {name!r} in {shown(url)} has another direction (Optuna's: {direction}, not "
            f"{mine['direction']}): " + fix.format(key="direction")
        )
    theirs = found.user_attrs
    missing = [key for key in ATTRS if key not in theirs]
    if missing and (settled or found.trials):
        raise ConfigError(
            f"study {name!r} in {shown(url)} records no {', '.join(missing)}: it was not made by "
            f"`pipeline tune`, so it may be another search: name a new study with --study"
        )
    for key, value in mine.items():
        if key in theirs and theirs[key] != value:
            raise ConfigError(
                f"study {name!r} in {shown(url)} has another {key} ({_brief(theirs[key])}, not "
                f"{_brief(value)}): " + fix.format(key=key)
            )


@dataclass
class Opened:
    study: optuna.Study
    run_id: str  # its MLflow run
    storage: str  # where it lives, as shown
    created: bool


def open_study(
    params: DatasetParams, name: str, url: str, *, create: bool = True, wait_seconds: float = 60.0
) -> Opened:
    """The study `name` in the storage at `url`: created with its MLflow run by the first worker
    (Optuna's storage decides which one, atomically), read, checked and loaded by every other.
    A study of that name with another dataset, space, metric or direction is a ConfigError; so
    is a study that does not exist when `create` is false. Every check comes before anything is
    written: a refused worker leaves the storage as it was."""
    storage = open_storage(url, params.tune) if holds_studies(url) else None
    found = read_study(storage, name) if storage is not None else None
    if found is None and not create:
        raise ConfigError(f"no study {name!r} in {shown(url)} (its studies: {study_names(storage)})")
    if found is None:
        probe.check_tracking()  # the study's run is made right after it: a store that cannot take it, first
        storage = storage or open_storage(url, params.tune)
        study = _create(params, name, storage)
        if study is not None:
            return Opened(study, _make_run(study, params, name, url), shown(url), created=True)
        found = read_study(storage, name)  # another worker made it first
        assert found is not None  # Optuna refused to make it because it is there
    check_same_search(found, params, name, url, settled=False)
    return _join(params, name, url, storage, found, wait_seconds)


def _chosen(params: DatasetParams, name: str, storage) -> dict:
    cfg = params.tune
    return dict(sampler=sampler(cfg), pruner=pruner(cfg, params.train.epochs), storage=storage, study_name=name)


def _create(params: DatasetParams, name: str, storage):
    """The study made, with what it searches recorded in it; None when another worker made it
    first (for a journal, Optuna has then appended its refused creation: a line it skips)."""
    optuna = quiet_optuna()
    try:
        study = optuna.create_study(direction=params.tune.direction, **_chosen(params, name, storage))
    except optuna.exceptions.DuplicatedStudyError:
        return None
    for key, value in identity(params, name).items():
        study.set_user_attr(key, value)
    return study


def _join(params: DatasetParams, name: str, url: str, storage, found: Recorded, wait_seconds: float) -> Opened:
    """A study another worker made, checked again as its creator records it: its MLflow run,
    once recorded (a moment), or made here when it is not within `wait_seconds` (its creator
    died setting it up, or it was made elsewhere)."""
    deadline = time.monotonic() + wait_seconds
    while RUN_ATTR not in found.user_attrs and time.monotonic() <= deadline:
        time.sleep(0.5)
        found = read_study(storage, name) or found
        check_same_search(found, params, name, url, settled=False)
    check_same_search(found, params, name, url, settled=True)
    study = quiet_optuna().load_study(**_chosen(params, name, storage))
    if RUN_ATTR not in found.user_attrs:
        return Opened(study, _make_run(study, params, name, url), shown(url), created=False)
    run_id = found.user_attrs[RUN_ATTR]
    if store.find_run(run_id) is None:
        raise ConfigError(
            f"study {name!r}'s MLflow run {run_id} is not in the tracking store in force "
            f"({store.tracking_uri()}): set MLFLOW_TRACKING_URI to the store the study logs to"
        )
    return Opened(study, run_id, shown(url), created=False)


def _make_run(study, params: DatasetParams, name: str, url: str) -> str:
    """The study's MLflow run, made and recorded in the study; its id."""
    run_id = study_runs.create_study_run(params.dataset, name, settings(params, name, url), shown(url))
    study.set_user_attr(RUN_ATTR, run_id)
    return run_id


def _brief(value) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= 80 else text[:77] + "..."


def settings(params: DatasetParams, name: str, url: str) -> dict:
    """The study's settings as its MLflow run's `tune.*` params."""
    cfg = params.tune
    return {
        "study": name,
        "storage": shown(url),
        "trials": cfg.trials,
        "sampler": cfg.sampler,
        "seed": cfg.seed,
        "startup_trials": cfg.startup_trials,
        "pruner": cfg.pruner,
        "metric": cfg.metric,
        "direction": cfg.direction,
        "epochs": params.train.epochs,
        "space": search_space.as_json(cfg.space),
    }


WITHDRAWN_ATTR = "withdrawn"


def counts(study) -> dict[str, int]:
    """The study's trials by state: complete, pruned, failed, running, waiting (a retry); not
    the ones withdrawn (see within_budget)."""
    found = {"complete": 0, "pruned": 0, "failed": 0, "running": 0, "waiting": 0}
    names = {"COMPLETE": "complete", "PRUNED": "pruned", "FAIL": "failed", "RUNNING": "running", "WAITING": "waiting"}
    for trial in study.get_trials(deepcopy=False):
        if not trial.user_attrs.get(WITHDRAWN_ATTR):
            found[names[trial.state.name]] += 1
    return found


def within_budget(study, trial, trials: int) -> bool:
    """Whether a trial just asked for is one of the study's `trials`: fewer than that many trials
    before it (by number, which the storage hands out one by one) are finished, running or
    waiting to run. Workers look at the counts before they ask, but two can look at once and
    both ask for the last place: the later number is then withdrawn (told failed, marked so,
    and left out of the counts)."""
    ahead = sum(
        1
        for t in study.get_trials(deepcopy=False)
        if t.number < trial.number
        and t.state.name in ("COMPLETE", "PRUNED", "RUNNING", "WAITING")
        and not t.user_attrs.get(WITHDRAWN_ATTR)
    )
    return ahead < trials


def best(study, space) -> Optional[dict]:
    """The best complete trial: its number, value, params (as train.<ds> takes them) and run."""
    try:
        trial = study.best_trial
    except ValueError:  # no complete trial yet
        return None
    return {
        "number": trial.number,
        "value": trial.value,
        "params": search_space.decode(space, trial.params),
        "run_id": trial.user_attrs.get(RUN_ATTR),
    }


def experiment_name(study_name: str) -> str:
    return f"tune-{study_name}-best"


def dvc_command(dataset: str, study_name: str, values: dict, overrides=()) -> list[str]:
    """The `dvc exp run` that trains and evaluates a trial's values as a named DVC experiment,
    with the study's own `-S` overrides of train.<ds> (its epochs, say) before them."""
    own = [item for item in overrides if item.startswith(f"train.{dataset}.")]
    sets = [arg for item in [*own, *search_space.overrides(dataset, values)] for arg in ("-S", item)]
    return ["dvc", "exp", "run", f"evaluate@{dataset}", "--name", experiment_name(study_name), *sets]


def dvc_line(dataset: str, study_name: str, values: dict, overrides=()) -> str:
    return shlex.join(dvc_command(dataset, study_name, values, overrides))
