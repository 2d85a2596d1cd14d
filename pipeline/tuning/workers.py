"""`pipeline tune`: the workers of a study. Each is one process that fixes its devices and
strategy once, then asks the study for trials until it has all of them; a trial trains with the
train stage's own code (`trainer.train`: the same config checks, model and loops) on the
prepared data, reports each epoch's metric to the pruner, and is an MLflow run under the
study's. Several workers here are processes started by `pipeline tune --workers N`; on other
hosts or Slurm array tasks each is a `pipeline tune` of its own on the same storage. The study
itself (storage, sampler, pruner, best trial) is `pipeline.tuning.studies`'s."""

from __future__ import annotations

import math
import os
import socket
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from pipeline import log

from pipeline.config import search_space

from pipeline.tuning import studies as studying
from pipeline.config.loader import load_params
from pipeline.errors import ConfigError


@dataclass(frozen=True)
class Target:
    """What a worker works on: a dataset's params (with `-S` overrides), a study and its storage."""

    dataset: str
    params_path: str
    overrides: tuple
    study: str
    storage: str
    data: str

    @classmethod
    def make(cls, dataset, params_path, overrides, study: Optional[str], storage: Optional[str], data) -> "Target":
        params = load_params(params_path, dataset, overrides)
        if storage:  # a usage error before the data, the store or a driver is asked
            studying.check_storage_url(storage)
        return cls(dataset, str(params_path), tuple(overrides), study or params.tune.study,
                   storage or studying.default_storage(), str(data))

    def params(self, extra=()):
        return load_params(self.params_path, self.dataset, [*self.overrides, *extra])


def prepare(target: Target) -> studying.Opened:
    """Before any worker starts: the params and data checked, the study created or joined (and
    checked against these params), its MLflow run made."""
    from pipeline.training import cluster
    from pipeline.data import arrays

    if cluster.detect_cluster() is not None:
        raise ConfigError("pipeline tune: a worker trains its trials in one process; under Slurm or with "
                          "TF_CONFIG, start one `pipeline tune` per task (deploy/slurm/tune.sbatch)")
    arrays.load_prepared(target.data, ("train", "val"))
    return studying.open_study(target.params(), target.study, target.storage)


def run(target: Target, workers: int) -> studying.Opened:
    """The study's trials, by `workers` processes here (one: this process), until it has all of
    them; returns the study."""
    opened = prepare(target)
    counts, trials = studying.counts(opened.study), target.params().tune.trials
    log.result(f"study {target.study} ({opened.storage}): {counts['complete'] + counts['pruned']} of {trials} trials "
               f"finished; {workers} worker{'s' if workers > 1 else ''} here")
    if workers == 1:
        work(target, opened)
    else:
        _run_workers(target, workers)
    return opened  # its study reads the storage afresh: what every worker did


def _run_workers(target: Target, workers: int) -> None:
    """`workers` processes of `python -m pipeline.tuning.workers`, the host's cores shared out between
    them (TensorFlow's thread pools), unless the environment or the params set them."""
    from pipeline.runtime import processes

    env = dict(os.environ)
    cfg = target.params().train.devices
    if "TF_NUM_INTRAOP_THREADS" not in env and not cfg.intra_op_threads:
        env["TF_NUM_INTRAOP_THREADS"] = str(max(1, (os.cpu_count() or 1) // workers))
    if "TF_NUM_INTEROP_THREADS" not in env and not cfg.inter_op_threads:
        env["TF_NUM_INTEROP_THREADS"] = "1"
    spec = {"target": target.__dict__}
    codes = processes.run_many("pipeline.tuning.workers", [spec] * workers, env=env)
    failed = [code for code in codes if code]
    if failed:
        raise SystemExit(failed[0])


def work(target: Target, opened: Optional[studying.Opened] = None) -> None:
    """One worker: its devices and strategy once, then trials until the study has them all."""
    import optuna

    from pipeline.training import distribute
    from pipeline.data import arrays

    params = target.params()
    opened = opened or studying.open_study(params, target.study, target.storage)
    cfg = params.tune
    study = opened.study
    setup = None  # TensorFlow once there is a trial to train: a finished study needs none
    while True:
        optuna.storages.fail_stale_trials(study)  # a dead worker's trial: failed, and queued again
        counts = studying.counts(study)
        finished = counts["complete"] + counts["pruned"]
        if finished >= cfg.trials:
            break
        if finished + counts["running"] >= cfg.trials and not counts["waiting"]:
            # the last trials are running elsewhere: wait for them (or for their workers' silence)
            import time

            time.sleep(min(cfg.heartbeat_seconds, 2))
            continue
        if setup is None:
            splits, stats = arrays.load_prepared(target.data, ("train", "val"))
            setup = distribute.setup(params.train, where=f"train.{target.dataset}")
        Trial(target, opened, setup, splits, stats).run()
    _record(target, opened)


def _record(target: Target, opened: studying.Opened) -> None:
    from pipeline.tuning import study_runs

    params = target.params()
    counts = studying.counts(opened.study)
    study_runs.record_progress(opened.run_id, metric=params.tune.metric,
                            counts={k: counts[k] for k in ("complete", "pruned", "failed")},
                            best=studying.best(opened.study, params.tune.space),
                            finished=counts["complete"] + counts["pruned"] >= params.tune.trials)


class _Pruned(Exception):
    def __init__(self, epoch: int):
        self.epoch = epoch


class Trial:
    """One trial: drawn, trained with a heartbeat, reported epoch by epoch, told to the study."""

    def __init__(self, target, opened, setup, splits, stats):
        self.target, self.opened, self.setup, self.splits, self.stats = target, opened, setup, splits, stats

    def run(self) -> None:
        import keras
        from optuna.trial import TrialState

        from pipeline.tuning import study_runs

        study, dataset = self.opened.study, self.target.dataset
        cfg = self.target.params().tune
        trial = study.ask()
        if not studying.within_budget(study, trial, cfg.trials):  # another worker took the last place
            trial.set_user_attr(studying.WITHDRAWN_ATTR, True)
            study.tell(trial, state=TrialState.FAIL)
            return
        values = search_space.suggest(trial, cfg.space)
        shown = " ".join(search_space.overrides(dataset, values)).replace(f"train.{dataset}.", "")
        try:
            params = self.target.params(search_space.overrides(dataset, values))
        except ConfigError as exc:  # a combination the config's checks across keys reject
            study.tell(trial, state=TrialState.FAIL)
            log.log.warning("%s trial %d: failed, the params drawn are rejected: %s", dataset, trial.number, exc)
            return
        run = study_runs.TrialRun.open(params, parent_run_id=self.opened.run_id, study=self.target.study,
                                    number=trial.number, values=values, figures=self.setup.figures(),
                                    data=Path(self.target.data), splits=self.splits,
                                    worker=f"{socket.gethostname()}:{os.getpid()}")
        trial.set_user_attr(studying.RUN_ATTR, run.run_id)
        last = {}

        def on_epoch(epoch, row):
            run.log_epoch(epoch, row)
            last.update(epoch=epoch, value=row.get(cfg.metric))
            if last["value"] is not None and math.isfinite(last["value"]):
                trial.report(last["value"], epoch)
                # not after the last epoch: the trial has trained in full, and its value counts
                if epoch < params.train.epochs and trial.should_prune():
                    raise _Pruned(epoch)

        beat = _Heartbeat(study, trial)
        try:
            with beat:
                from pipeline.training import trainer

                result = trainer.train(params.train, splits=self.splits, stats=self.stats,
                                        strategy=self.setup.strategy, on_epoch=on_epoch, verbose=0)
        except _Pruned as pruned:
            run.finish("pruned", epochs=pruned.epoch, value=last["value"], metric=cfg.metric)
            study.tell(trial, state=TrialState.PRUNED)
            log.result(f"{dataset} trial {trial.number}: pruned after epoch {pruned.epoch} ({cfg.metric} "
                       f"{last['value']:.4f}); {shown}")
            return
        except BaseException as exc:  # the worker stops: the trial is failed, not left running
            run.finish("failed", epochs=last.get("epoch", 0), value=None, metric=cfg.metric, reason=str(exc))
            study.tell(trial, state=TrialState.FAIL)
            raise
        finally:
            keras.backend.clear_session()
        best_epoch = result.summary["best_epoch"] or len(result.history)
        value = result.history[best_epoch - 1].get(cfg.metric)
        if value is None or not math.isfinite(value):
            run.finish("failed", epochs=len(result.history), value=None, metric=cfg.metric,
                       reason=f"{cfg.metric} is {value}")
            study.tell(trial, state=TrialState.FAIL)
            log.log.warning("%s trial %d: failed, %s is %s (the training diverged); %s", dataset, trial.number,
                            cfg.metric, value, shown)
            return
        run.finish("complete", epochs=len(result.history), value=value, metric=cfg.metric, best_epoch=best_epoch)
        study.tell(trial, value)
        log.result(f"{dataset} trial {trial.number}: {cfg.metric} {value:.4f} at epoch {best_epoch} of "
                   f"{len(result.history)}; {shown}")
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


def summary(target: Target, opened: studying.Opened) -> list[str]:
    """What a user reads at the end: the trials by state, the best one, and how to make it a
    DVC experiment."""
    params = target.params()
    counts = studying.counts(opened.study)
    lines = [f"study {target.study}: {counts['complete']} complete, {counts['pruned']} pruned, "
             f"{counts['failed']} failed of {params.tune.trials} trials ({opened.storage}); MLflow run {opened.run_id}"]
    best = studying.best(opened.study, params.tune.space)
    if best is None:
        lines.append("no trial has completed yet")
        return lines
    lines.append(f"best: trial {best['number']}, {params.tune.metric} {best['value']:.4f} (MLflow run {best['run_id']})")
    lines.append("as a DVC experiment (or `pipeline tune " + target.dataset + " --apply`):")
    lines.append("  " + studying.dvc_line(target.dataset, target.study, best["params"], target.overrides))
    return lines


def apply(target: Target, opened: studying.Opened) -> int:
    """Run the best trial's params as the named DVC experiment tune-<study>-best; DVC's exit code."""
    params = target.params()
    best = studying.best(opened.study, params.tune.space)
    if best is None:
        raise ConfigError(f"study {target.study!r} has no complete trial to apply yet")
    command = studying.dvc_command(target.dataset, target.study, best["params"], target.overrides)
    log.log.info("running %s", " ".join(command[:6]) + " ...")
    try:
        return subprocess.run(command).returncode
    except FileNotFoundError:
        raise ConfigError("dvc: not found on PATH; activate the project's environment (source .venv/bin/activate)") \
            from None


def _serve(spec: dict) -> dict:
    target = Target(**spec["target"])
    work(target)
    return {"host": socket.gethostname(), "pid": os.getpid()}


if __name__ == "__main__":
    from pipeline.runtime import processes

    processes.serve(_serve)
