"""The tracking store in force: its URI, a sqlite store made or migrated once under a lock,
the experiments it holds and where their artifacts live."""

from __future__ import annotations

import functools
import os
import re
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Optional

from pipeline import log
from pipeline.errors import ConfigError, TrackingError
from pipeline.io import locked


def repo_root(start: Optional[Path] = None) -> Path:
    """The project root: the working directory, or the main checkout when DVC runs a copy."""
    here = Path(start or Path.cwd()).resolve()
    parts = here.parts
    # `dvc exp run --temp/--queue` runs in <root>/.dvc/tmp/exps/<name>: log to <root>.
    for i in range(len(parts) - 3):
        if parts[i : i + 3] == (".dvc", "tmp", "exps"):
            return Path(*parts[:i])
    return here


# The tracking stores MLflow opens (a database through SQLAlchemy, a server, a folder), by
# scheme; `+driver` (postgresql+psycopg) is SQLAlchemy's.
TRACKING_SCHEMES = ("sqlite", "postgresql", "mysql", "mssql", "http", "https", "file", "databricks")


def tracking_uri() -> str:
    """MLFLOW_TRACKING_URI when set (checked by `check_scheme`); otherwise
    sqlite:///<repo root>/mlflow.db."""
    uri = os.environ.get("MLFLOW_TRACKING_URI")
    if uri:
        check_scheme(uri)
        return uri
    return f"sqlite:///{repo_root() / 'mlflow.db'}"


def registry_uri() -> str:
    """Where models are registered: MLFLOW_REGISTRY_URI when set (MLflow's own variable, checked
    by `check_scheme`), otherwise the tracking store."""
    uri = os.environ.get("MLFLOW_REGISTRY_URI")
    if uri:
        check_scheme(uri, "MLFLOW_REGISTRY_URI")
        return uri
    return tracking_uri()


def check_scheme(uri: str, variable: str = "MLFLOW_TRACKING_URI") -> None:
    """A ConfigError (usage: exit 2) naming the stores that work, for a tracking URI of a scheme
    MLflow has no store for, before MLflow is asked."""
    scheme = uri.split("://", 1)[0].split("+", 1)[0].lower() if "://" in uri else ""
    if scheme and scheme not in TRACKING_SCHEMES:
        raise ConfigError(
            f"{variable}: {uri.split('://', 1)[0]}:// is no MLflow tracking store: "
            "expected sqlite:///PATH, a tracking server's http(s)://HOST:PORT or a database "
            "URL (postgresql://, mysql://); set it to one, or unset it for mlflow.db here"
        )


def sqlite_path(uri: str) -> Optional[Path]:
    """The database file of a sqlite:// URI (None for any other store)."""
    if not uri.startswith("sqlite:"):
        return None
    path = uri[len("sqlite:///") :] if uri.startswith("sqlite:///") else uri[len("sqlite://") :]
    return Path(path.split("?", 1)[0])


def use_store() -> str:
    """Point MLflow at the tracking store, ready for runs of several processes at once; returns
    its URI.

    A sqlite store (the default, mlflow.db) is created, or migrated to this MLflow's schema
    (after a copy of the file is kept beside it), once, under an inter-process lock on
    `<file>.lock`: two processes that both find the file new or old would otherwise both run
    the migrations, and fail, leaving it half-migrated (mlflow#19299). Writers that meet later
    wait on sqlite's busy timeout, which MLflow sets to 20 s. Other stores are left to their
    server."""
    import mlflow

    uri = tracking_uri()
    mlflow.set_tracking_uri(uri)
    path = sqlite_path(uri)
    if path is None or path in _READY:
        return uri
    with store_lock(path):
        from mlflow.store.db import utils as db

        engine = db.create_sqlalchemy_engine_with_retry(uri)
        try:
            current = db._get_schema_version(engine)  # None: a new, empty file
            if current is not None and current != db._get_latest_schema_revision():
                backup = path.with_name(f"{path.name}.{current}.bak")
                shutil.copy2(path, backup)
                log.log.warning(
                    "%s: migrating the MLflow store to this MLflow's schema (a copy of the old one: %s)", path, backup
                )
                db._upgrade_db(engine)
        finally:
            engine.dispose()
        # A new file gets its tables here, and its "Default" experiment with its artifacts in
        # mlruns/ like the others (MLflow's default is relative to the working directory).
        from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

        SqlAlchemyStore(uri, artifact_root(path)).engine.dispose()
    _READY.add(path)
    return uri


_READY: set = set()


def artifact_root(db_file: Path) -> str:
    """Where a sqlite store's experiments keep their artifacts: mlruns/ beside the file."""
    return (Path(db_file).parent.resolve() / "mlruns").as_uri()


def store_lock(path: Path):
    """The lock of the sqlite store `path`: `<file>.lock` beside it."""
    return locked(path.with_name(path.name + ".lock"))


# What the experiments hold, in MLflow's own experiment tag: model training, not a GenAI
# app's traces. MLflow UIs up to about 3.3 take an experiment's kind from it (and open a
# model-training experiment on its runs); 3.17's ignores it and goes by the browser's
# "GenAI | Model training" switch (see RUNS_PAGE).
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
EXPERIMENT_KIND = "custom_model_development"

# An experiment's runs table with the UI in its model-training mode, whatever the browser's
# switch says: MLflow 3.17's UI reads the mode from the page's `workflowType` query first,
# then from the browser's saved choice (GenAI until the user clicks "Model training").
RUNS_PAGE = "{base}/#/experiments/{id}/runs?workflowType=machine_learning"


def use_experiment(name: str) -> str:
    """`use_store()`, then make the experiment `name` the active one, creating it if needed;
    returns its id. In a sqlite store its artifacts go to `mlruns/` beside the database file,
    set when the experiment is created: MLflow's own default is relative to the working
    directory, which under `dvc exp run --queue` or `--temp` is a copy DVC deletes.

    The experiment is tagged as model training (EXPERIMENT_KIND_TAG), when it is created or,
    made by an earlier version of the pipeline, the first time it is used without the tag; a
    value someone set on purpose (the UI lets users change it) is left as it is."""
    import mlflow

    uri = use_store()
    path = sqlite_path(uri)
    if path is None:
        experiment = mlflow.set_experiment(name)
        _tag_kind(experiment)
        return experiment.experiment_id
    with store_lock(path):  # two processes must not both create it
        found = mlflow.get_experiment_by_name(name)
        if found is None:
            location = f"{artifact_root(path)}/{name}"
            experiment_id = mlflow.create_experiment(
                name, artifact_location=location, tags={EXPERIMENT_KIND_TAG: EXPERIMENT_KIND}
            )
        else:
            _tag_kind(found)
            experiment_id = found.experiment_id
    return mlflow.set_experiment(experiment_id=experiment_id).experiment_id


def _tag_kind(experiment) -> None:
    """Tag `experiment` as model training unless it already has a kind."""
    if EXPERIMENT_KIND_TAG not in (experiment.tags or {}):
        from mlflow import MlflowClient

        MlflowClient(tracking_uri()).set_experiment_tag(experiment.experiment_id, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND)


def runs_pages(base: str, uri: Optional[str] = None) -> list[tuple[str, str]]:
    """(name, URL of its runs table in the UI at `base`) of each experiment the sqlite store
    holds but MLflow's own Default, by name; none when the store is not a sqlite file that exists and
    opens (a tracking server is not asked: MLflow retries one that does not answer for
    minutes)."""
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    uri = uri or tracking_uri()
    path = sqlite_path(uri)
    if path is None or not path.is_file():
        return []
    try:
        found = {e.name: e.experiment_id for e in MlflowClient(uri).search_experiments()}
    except (MlflowException, OSError):  # an older schema, say: the server migrates it
        return []
    return [
        (name, RUNS_PAGE.format(base=base.rstrip("/"), id=found[name])) for name in sorted(found) if name != "Default"
    ]


DVC_TEMP_FOLDER = "/.dvc/tmp/exps/"


def misplaced_artifacts(names: Optional[Iterable[str]] = None, uri: Optional[str] = None) -> list[tuple[str, str, str]]:
    """Of the experiments `names` (None: every experiment of the store), those whose artifact
    location lies inside a copy DVC deletes (made before the store put artifacts beside
    mlflow.db): (id, name, location) each. A sqlite store that does not exist yet has none."""
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    uri = uri or tracking_uri()
    path = sqlite_path(uri)
    if path is not None and not path.exists():
        return []
    try:
        experiments = MlflowClient(uri).search_experiments()
    except MlflowException as exc:
        raise TrackingError(f"{uri}: cannot list its experiments: {exc.message[:300]}") from None
    wanted = None if names is None else set(names)
    return [
        (e.experiment_id, e.name, e.artifact_location)
        for e in experiments
        if (wanted is None or e.name in wanted) and DVC_TEMP_FOLDER in (e.artifact_location or "").replace(os.sep, "/")
    ]


def run_that_trained(dataset: str, model_sha256: str):
    """The newest run of the dataset's experiment tagged with this model file's digest (the
    train stage tags its run `model.sha256`), or None."""
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    client = MlflowClient(use_store())
    try:
        experiment = client.get_experiment_by_name(dataset)
        if experiment is None:
            return None
        found = client.search_runs(
            [experiment.experiment_id],
            f"tags.`model.sha256` = '{model_sha256}'",
            order_by=["attributes.start_time DESC"],
            max_results=1,
        )
    except MlflowException as exc:
        raise TrackingError(
            f"{tracking_uri()}: cannot look up the run that trained this model: {exc.message}"
        ) from None
    return found[0] if found else None


def find_run(run_id: str):
    """The tracking store's run `run_id`, or None if it has none (reachable: check_tracking
    first)."""
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    try:
        return MlflowClient(use_store()).get_run(run_id)
    except MlflowException as exc:
        if exc.error_code == "RESOURCE_DOES_NOT_EXIST":
            return None
        raise TrackingError(f"{tracking_uri()}: cannot look up run {run_id}: {exc.message}") from None


def client():
    """An MlflowClient of the store in force (a sqlite store made or migrated once, under its lock)."""
    from mlflow import MlflowClient

    return MlflowClient(use_store())


RESUME_ADVICE = (
    "run the stage again once the tracking store answers (a training resumes from its backup and logs each epoch once)"
)


def tracked(what: str, doing: str = "logging", advice: str = RESUME_ADVICE, *, registry: bool = False):
    """Make an MLflow failure of the decorated call (a TrainingRun's method, a study's run, a
    registry call) one TrackingError, `<store>: <doing> <what> failed: <reason>; <advice>`:
    MLflow's client retries a server that does not answer for minutes (a blink passes
    unnoticed), then gives up. With `registry`, the store named is the model registry's
    (MLFLOW_REGISTRY_URI may point elsewhere than the tracking store)."""

    def wrap(method):
        @functools.wraps(method)
        def call(*args, **kwargs):
            from mlflow.exceptions import MlflowException

            try:
                return method(*args, **kwargs)
            except (MlflowException, OSError) as exc:
                message = exc.message if isinstance(exc, MlflowException) else str(exc)
                # urllib3's "Max retries exceeded ... [Errno 111] Connection refused": the reason
                reason = re.findall(r"\[Errno -?\d+\] ([^\"')]+)", message)
                where = registry_uri() if registry else tracking_uri()
                raise TrackingError(
                    f"{where}: {doing} {what} failed: {reason[-1] if reason else message[:300]}; {advice}"
                ) from None

        return call

    return wrap
