"""MLflow: one experiment per dataset, one run per training, with its lineage.

DVC decides what reruns; MLflow keeps the history. The train stage opens the run and writes
its id to a small file (a DVC out); the evaluate stage reopens that run to add test metrics.
With no MLFLOW_TRACKING_URI, runs go to MLflow's own default store, `sqlite:///mlflow.db` in
the repository root (also from a `dvc exp run --temp` copy of the repository).
"""

from __future__ import annotations

import contextlib
import functools
import os
import platform
import re
import socket
import subprocess
import warnings
from pathlib import Path
from typing import Iterable, Optional

import yaml

def repo_root(start: Optional[Path] = None) -> Path:
    """The project root: the working directory, or the main checkout when DVC runs a copy."""
    here = Path(start or Path.cwd()).resolve()
    parts = here.parts
    # `dvc exp run --temp/--queue` runs in <root>/.dvc/tmp/exps/<name>: log to <root>.
    for i in range(len(parts) - 3):
        if parts[i: i + 3] == (".dvc", "tmp", "exps"):
            return Path(*parts[:i])
    return here


def tracking_uri() -> str:
    """MLFLOW_TRACKING_URI when set; otherwise sqlite:///<repo root>/mlflow.db."""
    uri = os.environ.get("MLFLOW_TRACKING_URI")
    if uri:
        return uri
    return f"sqlite:///{repo_root() / 'mlflow.db'}"


def sqlite_path(uri: str) -> Optional[Path]:
    """The database file of a sqlite:// URI (None for any other store)."""
    if not uri.startswith("sqlite:"):
        return None
    path = uri[len("sqlite:///"):] if uri.startswith("sqlite:///") else uri[len("sqlite://"):]
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
    with _store_lock(path):
        from mlflow.store.db import utils as db

        engine = db.create_sqlalchemy_engine_with_retry(uri)
        try:
            current = db._get_schema_version(engine)  # None: a new, empty file
            if current is not None and current != db._get_latest_schema_revision():
                import shutil

                from pipeline import log

                backup = path.with_name(f"{path.name}.{current}.bak")
                shutil.copy2(path, backup)
                log.log.warning("%s: migrating the MLflow store to this MLflow's schema (a copy of the old "
                                "one: %s)", path, backup)
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


@contextlib.contextmanager
def _store_lock(path: Path):
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


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
    with _store_lock(path):  # two processes must not both create it
        found = mlflow.get_experiment_by_name(name)
        if found is None:
            location = f"{artifact_root(path)}/{name}"
            experiment_id = mlflow.create_experiment(name, artifact_location=location,
                                                     tags={EXPERIMENT_KIND_TAG: EXPERIMENT_KIND})
        else:
            _tag_kind(found)
            experiment_id = found.experiment_id
    return mlflow.set_experiment(experiment_id=experiment_id).experiment_id


def _tag_kind(experiment) -> None:
    """Tag `experiment` as model training unless it already has a kind."""
    if EXPERIMENT_KIND_TAG not in (experiment.tags or {}):
        from mlflow import MlflowClient

        MlflowClient(tracking_uri()).set_experiment_tag(experiment.experiment_id, EXPERIMENT_KIND_TAG,
                                                         EXPERIMENT_KIND)


def runs_pages(base: str, names: Iterable[str], uri: Optional[str] = None) -> list[tuple[str, str]]:
    """(name, URL of its runs table in the UI at `base`) of each of the experiments `names`
    that the sqlite store holds; none when the store is not a sqlite file that exists and
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
    return [(name, RUNS_PAGE.format(base=base.rstrip("/"), id=found[name])) for name in names if name in found]


def source_tags(stage: str, dataset: str) -> dict[str, str]:
    """Where a run came from, as the runs table's Source column shows it: the DVC stage that
    ran (`train@reuters`), or outside DVC the command (`pipeline train reuters`). MLflow's own
    default is the script's file name, `__main__.py` for `python -m pipeline`."""
    return {"mlflow.source.name": os.environ.get("DVC_STAGE") or f"pipeline {stage} {dataset}",
            "mlflow.source.type": "LOCAL"}


# Where `dvc exp run --queue` and `--temp` run a copy of the repository, deleted afterwards.
DVC_TEMP_FOLDER = "/.dvc/tmp/exps/"


def misplaced_artifacts(names: Iterable[str], uri: Optional[str] = None) -> list[tuple[str, str, str]]:
    """Of the experiments `names`, those whose artifact location lies inside a copy DVC
    deletes (made before the store put artifacts beside mlflow.db): (id, name, location)
    each. A sqlite store that does not exist yet has none."""
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    from pipeline.errors import TrackingError

    uri = uri or tracking_uri()
    path = sqlite_path(uri)
    if path is not None and not path.exists():
        return []
    try:
        experiments = MlflowClient(uri).search_experiments()
    except MlflowException as exc:
        raise TrackingError(f"{uri}: cannot list its experiments: {exc.message[:300]}") from None
    wanted = set(names)
    return [(e.experiment_id, e.name, e.artifact_location) for e in experiments
            if e.name in wanted and DVC_TEMP_FOLDER in (e.artifact_location or "").replace(os.sep, "/")]


def _check_sqlite_file(uri: str, path: Path) -> None:
    """TrackingError when the existing file `path` is not a SQLite database (read, not written)."""
    import sqlite3

    from pipeline.errors import TrackingError

    try:
        with contextlib.closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=30)) as db:
            db.execute("SELECT name FROM sqlite_master LIMIT 1").fetchall()
    except sqlite3.OperationalError:
        return  # busy with another process's migration, or unreadable: opening it says more
    except sqlite3.DatabaseError as exc:  # not a database, or a damaged one
        raise TrackingError(f"{uri}: {path} is not an MLflow store ({exc}); set MLFLOW_TRACKING_URI to the "
                            "store that holds the runs, or move the file away") from None


def _open_store(uri: str) -> str:
    """A store that is neither a sqlite file nor a server (a database server's URI, a folder,
    or a scheme MLflow does not know), opened as MLflow opens it: what MLflow raises on the
    way becomes one TrackingError naming the store, not an unexpected failure later."""
    from mlflow.tracking._tracking_service.utils import _get_store

    from pipeline.errors import TrackingError

    try:
        _get_store(uri)
    except Exception as exc:  # MLflow's, SQLAlchemy's or a driver's: the store cannot be opened
        reason = " ".join(str(exc).split()).split(". ")[0].rstrip(".")
        raise TrackingError(f"{uri}: cannot be opened as an MLflow tracking store ({reason}); set "
                            "MLFLOW_TRACKING_URI to a sqlite:/// file or a tracking server's URL") from None
    return f"{uri} (opened)"


def check_tracking(uri: Optional[str] = None, timeout: float = 5.0) -> str:
    """Whether the tracking store can take a run: a one-line description, or TrackingError.

    For a server: /health, then one query that reaches its database, with the credentials
    MLflow would send. MLflow itself retries a dead server for minutes before a traceback.
    """
    import base64
    import urllib.error
    import urllib.parse
    import urllib.request

    from pipeline.errors import TrackingError

    uri = uri or tracking_uri()
    scheme = urllib.parse.urlsplit(uri).scheme
    if scheme == "sqlite":
        path = sqlite_path(uri)
        folder = path.parent
        if not os.access(folder if folder.exists() else folder.parent, os.W_OK):
            raise TrackingError(f"{uri}: {folder} is not writable; run where you can write, or set "
                                "MLFLOW_TRACKING_URI to a tracking server")
        if path.exists():
            _check_sqlite_file(uri, path)
        return f"{uri} ({'exists' if path.exists() else 'made by the first run'})"
    if scheme not in ("http", "https"):
        return _open_store(uri)
    base = uri.rstrip("/")
    try:
        urllib.request.urlopen(f"{base}/health", timeout=timeout).close()
    except urllib.error.HTTPError as exc:
        raise TrackingError(f"{base}/health answered HTTP {exc.code}: not an MLflow server; "
                            "check MLFLOW_TRACKING_URI") from None
    except OSError as exc:
        reason = getattr(exc, "reason", exc)
        raise TrackingError(f"MLflow tracking server {base} does not answer ({reason}); start it, or "
                            "set MLFLOW_TRACKING_URI to one that runs (unset: mlflow.db here)") from None
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
            raise TrackingError(f"{base} requires a login and {who} (HTTP {exc.code}); set "
                                "MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD") from None
        raise TrackingError(f"{base} answers but cannot query its backend store (HTTP {exc.code}); check "
                            "the server's database (with docker/compose.yaml: the db service)") from None
    except OSError as exc:
        raise TrackingError(f"{base} answers /health but not a query ({getattr(exc, 'reason', exc)}); "
                            "check the server's database and logs") from None
    return f"{base} answers; its backend store too"


MAX_TAG = 5000  # characters of a tag value shown (MLflow's limit is 8,000)


def _git(args: list[str], cwd: Path) -> Optional[str]:
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


# What a repro writes, params.yaml (the run's params show it) and the documentation: a change
# to these does not make a run's code differ from its commit.
NOT_CODE = (":(exclude)dvc.lock", ":(exclude,glob)**/.gitignore", ":(exclude)reports", ":(exclude)params.yaml",
            ":(exclude,glob)**/*.md", ":(exclude)docs")


def git_state(root: Optional[Path] = None) -> tuple[Optional[str], list[str]]:
    """HEAD's commit (None outside git) and the tracked files whose content differs from it,
    apart from NOT_CODE."""
    root = Path(root or Path.cwd())
    commit = _git(["rev-parse", "HEAD"], root)
    if not commit:
        return None, []
    changed = _git(["diff", "--name-only", "HEAD", "--", ".", *NOT_CODE], root) or ""
    return commit, changed.splitlines()


def _commit_suffix(root: Optional[Path] = None) -> str:
    """`-<short commit>`, and `-dirty` when code differs from it, for a run's name."""
    commit, changed = git_state(root)
    return f"-{commit[:7]}{'-dirty' if changed else ''}" if commit else ""


def lineage_tags(inputs: Iterable[Path | str], root: Optional[Path] = None) -> dict[str, str]:
    """Git commit, whether code differs from it (and which files), dvc.lock hashes of
    `inputs`, DVC experiment, host, versions."""
    root = Path(root or Path.cwd())
    tags: dict[str, str] = {"host": socket.gethostname(), "python.version": platform.python_version()}
    commit, changed = git_state(root)
    if commit:
        # Dirty: tracked code differs from the commit. A `dvc exp run -S` edits params.yaml,
        # which the params show; a repro writes dvc.lock, reports/ and .gitignore files.
        tags.update({"git.commit": commit, "git.dirty": str(bool(changed)).lower(),
                     "mlflow.source.git.commit": commit})
        if changed:
            tags["git.changed_files"] = ", ".join(changed)[:MAX_TAG]
    tags.update(_dvc_hashes(inputs, root))
    for env, tag in (("DVC_EXP_NAME", "dvc.exp_name"), ("DVC_EXP_BASELINE_REV", "dvc.exp_baseline_rev"),
                     ("DVC_STAGE", "dvc.stage"), ("NVIDIA_TENSORFLOW_VERSION", "container.nvidia_tensorflow"),
                     ("PIPELINE_IMAGE", "container.image")):
        if os.environ.get(env):
            tags[tag] = os.environ[env]
    return tags


def _dvc_hashes(inputs: Iterable[Path | str], root: Path) -> dict[str, str]:
    """The md5 that dvc.lock records for each input path (as an out of the stage that made it)."""
    lock = root / "dvc.lock"
    if not lock.is_file():
        return {}
    try:
        stages = (yaml.safe_load(lock.read_text()) or {}).get("stages", {})
    except yaml.YAMLError:
        return {}
    recorded = {}
    for stage in stages.values():
        for out in stage.get("outs", []) or []:
            recorded[os.path.normpath(out["path"])] = out.get("md5") or out.get("hash") or ""
    tags = {}
    for path in inputs:
        rel = os.path.normpath(os.path.relpath((root / path).resolve(), root.resolve()))
        if rel in recorded and recorded[rel]:
            tags[f"dvc.data.{rel}"] = recorded[rel]
    return tags


def framework_tags() -> dict[str, str]:
    """TensorFlow, Keras, CUDA and cuDNN versions (CUDA/cuDNN 'none' on a CPU build), and the
    Python environment's (`pipeline.environment.describe`: the lock's or the container's)."""
    import keras
    import tensorflow as tf

    from pipeline import environment

    build = tf.sysconfig.get_build_info()
    return {
        "tensorflow.version": tf.__version__,
        "keras.version": keras.__version__,
        "cuda.version": str(build.get("cuda_version") or "none"),
        "cudnn.version": str(build.get("cudnn_version") or "none"),
        **environment.describe(),
    }


# System metrics (CPU, memory, and GPU utilisation and memory with nvidia-ml-py) every few
# seconds: MLflow's default of 10 s leaves a short training with one or two points.
SYSTEM_METRICS_SECONDS = 2


def run_name(dataset: str, loop: str, replicas: int, workers: int, precision: str) -> str:
    """What a run is, at a glance in the runs table: `reuters-fit-2rep-float32`."""
    return f"{dataset}-{loop}-{replicas}rep{f'-{workers}w' if workers > 1 else ''}-{precision}"


def model_requirements() -> list[str]:
    """The logged model's pip requirements: the exact installed version of every package the
    pipeline needs (after `make setup`, requirements.lock's pins), stated rather than inferred
    (inference reloads the model in a subprocess, which costs more than the rest of the logging)."""
    from pipeline import environment

    return environment.installed_requirements()


def device_params(figures: dict) -> dict:
    """A run's device counts and strategy (`distribute.Setup.figures()`) as MLflow params."""
    return {("devices." if key in ("physical_gpus", "logical_devices") else "distribute.") + key: value
            for key, value in figures.items()}


def _tracked(what: str):
    """Make a TrainingRun method's MLflow failure one TrackingError: MLflow's client retries a
    server that does not answer for minutes (a blink passes unnoticed), then gives up."""
    def wrap(method):
        @functools.wraps(method)
        def call(self, *args, **kwargs):
            from mlflow.exceptions import MlflowException

            from pipeline.errors import TrackingError

            try:
                return method(self, *args, **kwargs)
            except (MlflowException, OSError) as exc:
                message = exc.message if isinstance(exc, MlflowException) else str(exc)
                # urllib3's "Max retries exceeded ... [Errno 111] Connection refused": the reason
                reason = re.findall(r"\[Errno -?\d+\] ([^\"')]+)", message)
                raise TrackingError(
                    f"{tracking_uri()}: logging {what} failed: {reason[-1] if reason else message[:300]}; "
                    f"run the stage again once the tracking store answers (a training resumes from its "
                    f"backup and logs each epoch once)") from None
        return call
    return wrap


class TrainingRun:
    """The MLflow run of one training: opened by the train stage, reopened by evaluate.

    Under MultiWorkerMirroredStrategy only the chief logs: on every other worker the run is
    `TrainingRun(None)`, whose methods do nothing. Use it as a context manager: the run ends
    FINISHED, or FAILED when an exception leaves the block.
    """

    def __init__(self, active=None):
        self._active = active

    @classmethod
    def open(cls, dataset: str, name: str, *, chief: bool = True, run_id: Optional[str] = None) -> "TrainingRun":
        """Start the training run of `dataset` (its experiment is named after it) with system
        metrics, or reopen `run_id` (a resumed training). The run is named after the DVC
        experiment under `dvc exp run`, else `name` and the short commit (`-dirty` when code
        differs from it); `name` stays in the tag `pipeline.run_name`."""
        if not chief:
            return cls(None)
        check_tracking()
        import logging

        import mlflow
        import mlflow.system_metrics

        if run_id is not None:
            use_store()
            return cls(mlflow.start_run(run_id=run_id))
        use_experiment(dataset)
        mlflow.system_metrics.set_system_metrics_sampling_interval(SYSTEM_METRICS_SECONDS)
        mlflow.system_metrics.set_system_metrics_samples_before_logging(1)
        # its start and stop notices are INFO lines on every run, and when the store stops
        # answering it warns on every sample: the training's own logging says it once
        logging.getLogger("mlflow.system_metrics").setLevel(logging.ERROR)
        active = mlflow.start_run(run_name=os.environ.get("DVC_EXP_NAME") or f"{name}{_commit_suffix()}",
                                  log_system_metrics=True, tags=source_tags("train", dataset))
        mlflow.set_tag("pipeline.run_name", name)
        return cls(active)

    @classmethod
    def reopen(cls, run_id: str) -> "TrainingRun":
        """The training run that the train stage recorded, to add evaluation results."""
        import mlflow

        use_store()
        return cls(mlflow.start_run(run_id=run_id))

    @classmethod
    def for_evaluation(cls, params, model_ids: dict, model_dir: Path) -> "TrainingRun":
        """The run that receives a model's evaluation.

        The training run, when this store has it and nothing has evaluated it yet: the train
        and evaluate stages of one `dvc repro` or `dvc exp run` make one row. Otherwise a new
        run in the dataset's experiment, so that no experiment changes another's row:
        - the model was evaluated before (an experiment that changed only evaluate's params
          or code, or whose training DVC restored from its run cache): the new run holds the
          training run's params with this evaluation's, its device counts, metrics with their
          per-epoch history, and names the model (`pipeline.model_uri`) instead of logging it
          again;
        - the store never saw the training (a clone whose models came from a DVC remote with
          `dvc pull`): the new run says where the model came from.
        """
        import mlflow

        from pipeline import log

        run_id = model_ids["run_id"]
        training = find_run(run_id)
        # evaluated: it has test metrics (pipeline.evaluation names them all test_*)
        if training is not None and not any(key.startswith("test_") for key in training.data.metrics):
            return cls.reopen(run_id)
        use_experiment(params.dataset)
        name = os.environ.get("DVC_EXP_NAME") or f"{params.dataset}-evaluation{_commit_suffix()}"
        active = mlflow.start_run(run_name=name, tags=source_tags("evaluate", params.dataset))
        tags = {**lineage_tags([model_dir]), **framework_tags(), "pipeline.stage": "evaluate",
                "pipeline.dataset": params.dataset, "pipeline.model_run_id": run_id}
        if training is None:
            mlflow.log_params(params.flat())
            mlflow.set_tags(tags)
            log.log.warning("MLflow run %s, which trained %s, is not in this tracking store (%s); the "
                            "evaluation is logged to a new run, %s, tagged with where the model came from",
                            run_id, model_dir, tracking_uri(), active.info.run_id)
            return cls(active)
        copied = {k: v for k, v in training.data.tags.items() if k in COPIED_TAGS or k.startswith("dvc.data.")}
        mlflow.set_tags({**copied, **tags, "pipeline.model_uri": f"runs:/{run_id}/model"})
        mlflow.log_params({**training.data.params, **{k: str(v) for k, v in params.flat().items()}})
        _copy_metrics(run_id, active.info.run_id, training.data.metrics)
        log.log.info("%s was evaluated before, in MLflow run %s: this evaluation is a run of its own, %s",
                     model_dir, run_id, active.info.run_id)
        return cls(active)

    def __enter__(self) -> "TrainingRun":
        return self

    def __exit__(self, *exc):
        if self._active is None:
            return False
        if exc[0] is None:
            self._end(*exc)
            return False
        try:
            self._active.__exit__(*exc)  # FAILED
        except Exception:  # noqa: BLE001 - the store is gone too; the first error is the one to tell
            pass
        return False

    @_tracked("the end of the run")
    def _end(self, *exc):
        self._active.__exit__(*exc)  # FINISHED

    @property
    def run_id(self) -> Optional[str]:
        return self._active.info.run_id if self._active is not None else None

    @property
    def ids(self) -> dict:
        """What the train stage records in models/<dataset>/run.json."""
        return {"run_id": self.run_id, "experiment_id": self._active.info.experiment_id} if self._active else {}

    @_tracked("the run's params and tags")
    def log_setup(self, params, figures: dict, data: Path, splits: dict) -> None:
        """Every param of the dataset's stages, the devices and strategy, the sample counts,
        lineage and framework tags, and the prepared data as dataset inputs."""
        if self._active is None:
            return
        import mlflow

        mlflow.log_params({**params.flat(), **device_params(figures),
                           **{f"data.{split}_samples": len(y) for split, (_, y) in splits.items()}})
        mlflow.set_tags({**lineage_tags([data]), **framework_tags(),
                         "pipeline.stage": "train", "pipeline.dataset": params.dataset})
        log_inputs(params.dataset, data, splits)

    @_tracked("an epoch's metrics")
    def log_epoch(self, epoch: int, row: dict) -> None:
        if self._active is not None:
            import mlflow

            mlflow.log_metrics({k: v for k, v in row.items() if k != "epoch"}, step=epoch)

    @_tracked("the training's summary and model")
    def log_training(self, result, *, weights_sha256: str, history: Path, curves: Path, sample) -> None:
        """Time and throughput, the global batch, the weights' digest, the history and the
        learning curves, and the model with a signature inferred from `sample` (model inputs)."""
        if self._active is None:
            return
        import mlflow
        import mlflow.tensorflow
        from mlflow.models import infer_signature

        mlflow.log_param("train.global_batch_size", result.global_batch_size)
        mlflow.log_metrics({"train_seconds": result.train_seconds,
                            "samples_per_second": result.samples_per_second,
                            "peak_rss_mb": round(result.peak_rss_mb),
                            "best_epoch": result.summary["best_epoch"],
                            "epochs_trained": result.summary["epochs_trained"]})
        mlflow.set_tag("weights.sha256", weights_sha256)
        mlflow.log_artifact(str(history))
        mlflow.log_artifact(str(curves), artifact_path="plots")
        # A plain call, not predict: under MultiWorkerMirroredStrategy predict is a collective
        # step, and the other workers have finished by now.
        import keras

        outputs = keras.ops.convert_to_numpy(result.model(sample, training=False))
        mlflow.tensorflow.log_model(result.model, name="model", signature=infer_signature(sample, outputs),
                                    pip_requirements=model_requirements())

    @_tracked("the evaluation")
    def log_evaluation(self, dataset: str, data: Path, evaluation, artifacts: list[Path]) -> None:
        """Test metrics, the per-class table, the confusion matrix, the test split as a
        dataset input, and the evaluate stage's files under `evaluation/`."""
        if self._active is None:
            return
        import mlflow

        log_inputs(dataset, data, {"test": (evaluation.x, evaluation.y_true)})
        mlflow.log_metrics({k: v for k, v in evaluation.metrics.items() if k != "test_samples"})
        report = evaluation.report
        mlflow.log_table({k: [r[k] for r in report] for k in report[0]}, "evaluation/per_class.json")
        for path in artifacts:
            mlflow.log_artifact(str(path), artifact_path="evaluation")
        mlflow.log_dict({"labels": list(range(len(evaluation.matrix))), "matrix": evaluation.matrix.tolist()},
                        "evaluation/confusion_matrix.json")


# The figures of `pipeline bench` that become MLflow metrics (the rest are params or tags).
BENCHMARK_METRICS = ("samples_per_second", "samples_per_second_per_replica", "step_ms_median", "step_ms_p95",
                     "input_wait_percent", "cpu_percent", "peak_rss_mb", "seconds", "scaling_efficiency")


@_tracked("the benchmark")
def _log_benchmark(params, figures: dict, name: str, data: Path) -> str:
    import mlflow

    use_experiment(params.dataset)
    with mlflow.start_run(run_name=name, tags=source_tags("bench", params.dataset)) as run:
        settings = {k: v for k, v in figures.items() if k not in BENCHMARK_METRICS and k != "devices"}
        mlflow.log_params({**params.flat(), **{f"bench.{k}": v for k, v in settings.items()}})
        mlflow.log_metrics({f"bench.{k}": figures[k] for k in BENCHMARK_METRICS if k in figures})
        mlflow.set_tags({**lineage_tags([data]), **framework_tags(), "pipeline.stage": "bench",
                         "pipeline.benchmark": "true", "pipeline.dataset": params.dataset,
                         "bench.devices": ", ".join(figures["devices"])})
        return run.info.run_id


def log_benchmark(params, figures: dict, data: Path) -> str:
    """One run of `pipeline bench` in the dataset's experiment, tagged `pipeline.benchmark`
    (a filter: `tags.pipeline.benchmark = 'true'`) so that it compares with the others."""
    check_tracking()
    name = f"bench-{params.dataset}-{figures['replicas']}rep-{figures['precision']}"
    return _log_benchmark(params, figures, name, data)


@_tracked("the scaling efficiency")
def log_scaling(results: list[dict]) -> None:
    """Each replica count's efficiency, computed once all were measured, into its run."""
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri())
    for result in results:
        if result.get("mlflow_run_id"):
            client.log_metric(result["mlflow_run_id"], "bench.scaling_efficiency", result["scaling_efficiency"])


def find_run(run_id: str):
    """The tracking store's run `run_id`, or None if it has none (reachable: check_tracking
    first)."""
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    from pipeline.errors import TrackingError

    try:
        return MlflowClient(use_store()).get_run(run_id)
    except MlflowException as exc:
        if exc.error_code == "RESOURCE_DOES_NOT_EXIST":
            return None
        raise TrackingError(f"{tracking_uri()}: cannot look up run {run_id}: {exc.message}") from None


# What an evaluation's own run takes over from the training run it reused, besides params and
# metrics: which weights, and what the training was.
COPIED_TAGS = ("weights.sha256", "pipeline.run_name")


def _copy_metrics(source: str, dest: str, latest: dict) -> None:
    """The training's metrics of run `source`, each with its whole history: not its system
    metrics, nor the test metrics of its own evaluation."""
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri())
    history = [m for key in latest if not key.startswith(("system/", "test_"))
               for m in client.get_metric_history(source, key)]
    for start in range(0, len(history), 1000):  # MLflow's limit per batch
        client.log_batch(dest, metrics=history[start:start + 1000])


def log_inputs(dataset: str, data: Path | str, splits: dict, root: Optional[Path] = None) -> None:
    """The prepared data a run read, as MLflow dataset inputs: named `<dataset>-<split>`,
    sourced at the DVC path, with the md5 dvc.lock records for it as digest (so MLflow
    does not hash the arrays again)."""
    root = Path(root or Path.cwd())
    rel = os.path.normpath(os.path.relpath(Path(data).resolve(), root.resolve()))
    digest = _dvc_hashes([data], root).get(f"dvc.data.{rel}", "")[:32] or None
    contexts = {"train": "training", "val": "validation", "test": "testing"}
    # MLflow looks a dataset up, then inserts it: two runs logging the same data at once into
    # one sqlite store both insert, and one fails (UNIQUE constraint): take turns.
    path = sqlite_path(tracking_uri())
    with _store_lock(path) if path is not None else contextlib.nullcontext():
        _log_splits(dataset, splits, rel, digest, contexts)


def _log_splits(dataset: str, splits: dict, rel: str, digest, contexts: dict) -> None:
    import mlflow
    import mlflow.data

    for split, (x, y) in splits.items():
        with warnings.catch_warnings():
            # a relative path matches two of MLflow's local source types; both read it alike
            warnings.filterwarnings("ignore", message="The specified dataset source can be interpreted")
            ds = mlflow.data.from_numpy(x, targets=y, source=rel, name=f"{dataset}-{split}", digest=digest)
        mlflow.log_input(ds, context=contexts.get(split, split))
