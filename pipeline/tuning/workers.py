"""`pipeline tune`: the workers of a study. Each is one process that fixes its devices and
strategy once, then asks the study for trials until it has all of them; a trial trains with the
train stage's own code (`trainer.train`: the same config checks, model and loops) on the
prepared data, reports each epoch's metric to the pruner, and is an MLflow run under the
study's. Several workers here are processes started by `pipeline tune --workers N`; on other
hosts or Slurm array tasks each is a `pipeline tune` of its own on the same storage. The study
itself (sampler, pruner, best trial) is `pipeline.tuning.studies`'s, its storage
`pipeline.tuning.storage`'s."""

from __future__ import annotations

import math
import os
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from pipeline import log
from pipeline.config.loading import search_space
from pipeline.config.loading.loader import load_params, overridden, params_of
from pipeline.data.fetch import pretrained_beside
from pipeline.errors import ConfigError
from pipeline.runtime import processes
from pipeline.training import cluster, distribute
from pipeline.tuning import attributes, studies, study_runs
from pipeline.tuning.storage import check_storage_url, default_storage

if TYPE_CHECKING:
    from pipeline.config.keys.schema import DatasetParams
    from pipeline.data.prepared import Prepared


@dataclass(frozen=True)
class Target:
    """What a worker works on: a dataset's params (the file read once, with the `-S` overrides),
    a study and its storage, the prepared data's folder."""

    params: DatasetParams
    source: str  # the params file, as messages name it
    overrides: tuple  # the `-S` given, which the DVC line of the best trial repeats
    study: str
    storage: str
    prepared_dir: str

    @property
    def dataset(self) -> str:
        return self.params.dataset

    @classmethod
    def make(
        cls, dataset, params_path, overrides, study: Optional[str], storage: Optional[str], prepared_dir
    ) -> Target:
        params = load_params(params_path, dataset, overrides)
        if params.tune.metric.startswith("val_") and params.preprocess.validation_split == 0:
            raise ConfigError(
                f"{params_path}: tune.{dataset}.metric: {params.tune.metric} needs a validation split, and "
                f"preprocess.{dataset}.validation_split is 0 (every training sample trains the model): set it (0.1) "
                f"and run `dvc repro preprocess@{dataset}` before tuning"
            )
        if storage:  # a usage error before the data, the store or a driver is asked
            check_storage_url(storage)
        return cls(
            params,
            str(params_path),
            tuple(overrides),
            study or params.tune.study,
            storage or default_storage(),
            str(prepared_dir),
        )

    def spec(self) -> dict:
        """The target as a worker process is handed it (JSON): the params' mapping, not the file."""
        return {
            "raw": self.params.raw,
            "dataset": self.dataset,
            "source": self.source,
            "overrides": list(self.overrides),
            "study": self.study,
            "storage": self.storage,
            "prepared_dir": self.prepared_dir,
        }

    @classmethod
    def from_spec(cls, spec: dict) -> Target:
        return cls(
            params_of(spec["raw"], spec["dataset"], spec["source"]),
            spec["source"],
            tuple(spec["overrides"]),
            spec["study"],
            spec["storage"],
            spec["prepared_dir"],
        )

    def trial_params(self, values: dict) -> DatasetParams:
        """The params a trial trains with: its drawn values over the target's."""
        return overridden(self.params, search_space.overrides(self.dataset, values), self.source)


def prepare(target: Target) -> studies.Opened:
    """Before any worker starts: the params and data checked, the study created or joined (and
    checked against these params), its MLflow run made."""
    from pipeline.data import prepared  # NumPy: after the config is checked

    if cluster.detect_cluster() is not None:
        raise ConfigError(
            "pipeline tune: a worker trains its trials in one process; under Slurm or with "
            "TF_CONFIG, start one `pipeline tune` per task (deploy/slurm/tune.sbatch)"
        )
    prepared.read(target.prepared_dir).check("train", "val")
    return studies.open_study(target.params, target.study, target.storage)


def run(target: Target, workers: int) -> studies.Opened:
    """The study's trials, by `workers` processes here (one: this process), until it has all of
    them; returns the study."""
    opened = prepare(target)
    counts, trials = studies.counts(opened.study), target.params.tune.trials
    log.result(
        f"study {target.study} ({opened.storage}): {counts['complete'] + counts['pruned']} of {trials} trials "
        f"finished; {workers} worker{'s' if workers > 1 else ''} here"
    )
    if workers == 1:
        work(target, opened)
    else:
        _run_workers(target, workers)
    return opened  # its study reads the storage afresh: what every worker did


def _run_workers(target: Target, workers: int) -> None:
    """`workers` processes of `python -m pipeline.tuning.workers`, the host's cores shared out between
    them (TensorFlow's thread pools), unless the environment or the params set them."""
    env = dict(os.environ)
    cfg = target.params.train.devices
    if "TF_NUM_INTRAOP_THREADS" not in env and not cfg.intra_op_threads:
        env["TF_NUM_INTRAOP_THREADS"] = str(max(1, (os.cpu_count() or 1) // workers))
    if "TF_NUM_INTEROP_THREADS" not in env and not cfg.inter_op_threads:
        env["TF_NUM_INTEROP_THREADS"] = "1"
    codes = processes.run_many("pipeline.tuning.workers", [target.spec()] * workers, env=env)
    failed = [code for code in codes if code]
    if failed:
        raise SystemExit(failed[0])


def work(target: Target, opened: Optional[studies.Opened] = None) -> None:
    """One worker: its devices and strategy once, then trials until the study has them all."""
    import optuna  # with SQLAlchemy: seconds, which --best and a config error never pay

    from pipeline.data import prepared  # NumPy: after the config is checked

    params = target.params
    opened = opened or studies.open_study(params, target.study, target.storage)
    cfg, study = params.tune, opened.study
    setup = None  # TensorFlow once there is a trial to train: a finished study needs none
    while True:
        optuna.storages.fail_stale_trials(study)  # a dead worker's trial: failed, and queued again
        counts = studies.counts(study)
        finished = counts["complete"] + counts["pruned"]
        if finished >= cfg.trials:
            break
        if finished + counts["running"] >= cfg.trials and not counts["waiting"]:
            # the last trials are running elsewhere: wait for them (or for their workers' silence)
            time.sleep(min(cfg.heartbeat_seconds, 2))
            continue
        if setup is None:
            description = prepared.read(target.prepared_dir)
            setup = distribute.setup(params.train, where=f"train.{target.dataset}")
        Trial(target, opened, setup, description).run()
    _record(target, opened)


def _record(target: Target, opened: studies.Opened) -> None:
    cfg = target.params.tune
    counts = studies.counts(opened.study)
    study_runs.record_progress(
        opened.run_id,
        metric=cfg.metric,
        counts={k: counts[k] for k in ("complete", "pruned", "failed")},
        best=studies.best(opened.study, cfg.space),
        finished=counts["complete"] + counts["pruned"] >= cfg.trials,
    )


class _Pruned(Exception):
    def __init__(self, epoch: int):
        self.epoch = epoch


class Trial:
    """One trial: drawn, trained with a heartbeat, reported epoch by epoch, told to the study."""

    def __init__(self, target: Target, opened: studies.Opened, setup, prepared: Prepared):
        self.target, self.opened, self.setup, self.prepared = target, opened, setup, prepared
        self.cfg = target.params.tune
        self.last: dict = {}

    def run(self) -> None:
        """Ask the study for a trial, train it, and tell the study how it ended."""
        from optuna.trial import TrialState

        study, dataset = self.opened.study, self.target.dataset
        trial = study.ask()
        if not studies.within_budget(study, trial, self.cfg.trials):  # another worker took the last place
            trial.set_user_attr(attributes.WITHDRAWN_ATTR, True)
            study.tell(trial, state=TrialState.FAIL)
            return
        values = search_space.suggest(trial, self.cfg.space)
        self.shown = " ".join(search_space.overrides(dataset, values)).replace(f"train.{dataset}.", "")
        try:
            params = self.target.trial_params(values)
        except ConfigError as exc:  # a combination the config's checks across keys reject
            study.tell(trial, state=TrialState.FAIL)
            log.log.warning("%s trial %d: failed, the params drawn are rejected: %s", dataset, trial.number, exc)
            return
        run = self._open_run(params, trial, values)
        try:
            result = self._train(params, trial, run)
        except _Pruned as pruned:
            run.finish("pruned", epochs=pruned.epoch, value=self.last["value"], metric=self.cfg.metric)
            study.tell(trial, state=TrialState.PRUNED)
            log.result(
                f"{dataset} trial {trial.number}: pruned after epoch {pruned.epoch} ({self.cfg.metric} "
                f"{self.last['value']:.4f}); {self.shown}"
            )
            return
        except BaseException as exc:  # the worker stops: the trial is failed, not left running
            run.finish("failed", epochs=self.last.get("epoch", 0), value=None, metric=self.cfg.metric, reason=str(exc))
            study.tell(trial, state=TrialState.FAIL)
            raise
        self._tell(trial, run, result)

    def _open_run(self, params: DatasetParams, trial, values: dict):
        run = study_runs.TrialRun.open(
            params,
            parent_run_id=self.opened.run_id,
            study=self.target.study,
            number=trial.number,
            values=values,
            figures=self.setup.figures(),
            prepared=self.prepared,
            worker=f"{socket.gethostname()}:{os.getpid()}",
        )
        trial.set_user_attr(attributes.RUN_ATTR, run.run_id)
        return run

    def _train(self, params: DatasetParams, trial, run):
        """The train stage's training, each epoch reported to the pruner; raises _Pruned."""
        import keras

        from pipeline.training import trainer  # TensorFlow: only once it trains

        def on_epoch(epoch, row):
            run.log_epoch(epoch, row)
            self.last.update(epoch=epoch, value=row.get(self.cfg.metric))
            if self.last["value"] is not None and math.isfinite(self.last["value"]):
                trial.report(self.last["value"], epoch)
                # not after the last epoch: the trial has trained in full, and its value counts
                if epoch < params.train.epochs and trial.should_prune():
                    raise _Pruned(epoch)

        try:
            with _Heartbeat(self.opened.study, trial):
                return trainer.train(
                    params.train,
                    prepared=self.prepared,
                    strategy=self.setup.strategy,
                    on_epoch=on_epoch,
                    verbose=0,
                    pretrained=pretrained_beside(self.target.prepared_dir),
                )
        finally:
            keras.backend.clear_session()

    def _tell(self, trial, run, result) -> None:
        """A trained trial's value to the study, the metric of the epoch whose weights the model
        has (`kept_epoch`: the best one where it is restored, else the last); failed when not a
        number."""
        from optuna.trial import TrialState

        study, dataset, metric = self.opened.study, self.target.dataset, self.cfg.metric
        best_epoch = result.summary["best_epoch"] or len(result.history)
        kept = result.summary["kept_epoch"]
        value = result.history[kept - 1].get(metric)
        if value is None or not math.isfinite(value):
            run.finish("failed", epochs=len(result.history), value=None, metric=metric, reason=f"{metric} is {value}")
            study.tell(trial, state=TrialState.FAIL)
            log.log.warning(
                "%s trial %d: failed, %s is %s (the training diverged); %s",
                dataset,
                trial.number,
                metric,
                value,
                self.shown,
            )
            return
        run.finish("complete", epochs=len(result.history), value=value, metric=metric, best_epoch=best_epoch)
        study.tell(trial, value)
        log.result(
            f"{dataset} trial {trial.number}: {metric} {value:.4f} at epoch {kept} of "
            f"{len(result.history)}; {self.shown}"
        )
        _record(self.target, self.opened)


class _Heartbeat:
    """Records the trial's heartbeat every interval while it trains (Optuna's optimize does this
    for its own loop; the workers ask and tell, to say each trial's outcome in their words)."""

    def __init__(self, study, trial):
        self.storage, self.trial_id = study._storage, trial._trial_id
        self.interval = self.storage.get_heartbeat_interval()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._beat, daemon=True)

    def _beat(self):
        while True:
            self.storage.record_heartbeat(self.trial_id)
            if self.stop.wait(self.interval):
                return

    def __enter__(self):
        self.thread.start()

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()
        return False


def summary(target: Target, opened: studies.Opened) -> list[str]:
    """What a user reads at the end: the trials by state, the best one, and how to make it a
    DVC experiment."""
    params = target.params
    counts = studies.counts(opened.study)
    lines = [
        f"study {target.study}: {counts['complete']} complete, {counts['pruned']} pruned, "
        f"{counts['failed']} failed of {params.tune.trials} trials ({opened.storage}); MLflow run {opened.run_id}"
    ]
    best = studies.best(opened.study, params.tune.space)
    if best is None:
        lines.append("no trial has completed yet")
        return lines
    lines.append(
        f"best: trial {best['number']}, {params.tune.metric} {best['value']:.4f} (MLflow run {best['run_id']})"
    )
    lines.append("as a DVC experiment (or `pipeline tune " + target.dataset + " --apply`):")
    lines.append("  " + studies.dvc_line(target.dataset, target.study, best["params"], target.overrides))
    return lines


def apply(target: Target, opened: studies.Opened) -> int:
    """Run the best trial's params as the named DVC experiment tune-<study>-best; DVC's exit code."""
    params = target.params
    best = studies.best(opened.study, params.tune.space)
    if best is None:
        raise ConfigError(f"study {target.study!r} has no complete trial to apply yet")
    command = studies.dvc_command(target.dataset, target.study, best["params"], target.overrides)
    log.log.info("running %s", " ".join(command[:6]) + " ...")
    try:
        return subprocess.run(command).returncode
    except FileNotFoundError:
        raise ConfigError(
            "dvc: not found on PATH; activate the project's environment (source .venv/bin/activate)"
        ) from None


def _serve(spec: dict) -> dict:
    work(Target.from_spec(spec))
    return {"host": socket.gethostname(), "pid": os.getpid()}


if __name__ == "__main__":
    from pipeline.runtime import processes

    processes.serve(_serve)
