"""The MLflow runs of a study (`pipeline tune`): one parent run per study in the dataset's
experiment, holding the study's settings and its best trial so far, and a child run per trial
with its params, per-epoch curves, state (complete, pruned, failed) and the epochs it trained.
The MLflow UI nests the trials under the study; `pipeline compare` takes their names."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Optional

from pipeline.tracking import lineage, probe, store
from pipeline.tracking.runs import device_params
from pipeline.tracking.store import tracked

if TYPE_CHECKING:
    from pipeline.config.keys.schema import DatasetParams
    from pipeline.data.prepared import Prepared

# Where a trial's run keeps the study's and the trial's identity (MLflow's own parent tag nests it).
PARENT_TAG = "mlflow.parentRunId"
STUDY_TAG = "optuna.study"
TRIAL_TAG = "optuna.trial"
STATE_TAG = "optuna.state"


@tracked("the study's run")
def create_study_run(dataset: str, study: str, settings: dict, storage: str) -> str:
    """The study's parent run, in the dataset's experiment: the study's name, space, sampler,
    pruner, metric and budget as `tune.*` params; returns its id."""
    from mlflow.entities import Param

    probe.check_tracking()
    experiment_id = store.use_experiment(dataset)
    client = store.client()
    tags = {
        **lineage.source_tags("tune", dataset),
        **lineage.lineage_tags([]),
        **lineage.framework_tags(),
        "pipeline.stage": "tune",
        "pipeline.dataset": dataset,
        STUDY_TAG: study,
        "optuna.storage": storage,
    }
    run = client.create_run(experiment_id, run_name=f"tune-{study}", tags=tags)
    client.log_batch(run.info.run_id, params=[Param(f"tune.{k}", str(v)) for k, v in settings.items()])
    return run.info.run_id


@tracked("the study's best trial")
def record_progress(run_id: str, *, metric: str, counts: dict, best: Optional[dict], finished: bool) -> None:
    """The study's figures so far on its run: trials by state, and the best trial's number,
    value (`best_<metric>`) and params (tags `best.*`), each a step per finished trial; the run
    ends FINISHED when the study has all its trials, and runs again when a rerun adds some."""
    from mlflow.entities import Metric, RunTag

    client = store.client()
    step = sum(counts.values())
    now = int(time.time() * 1000)
    metrics = [Metric(f"trials_{state}", n, now, step) for state, n in counts.items()]
    tags = []
    if best is not None:
        metrics += [Metric(f"best_{metric}", best["value"], now, step), Metric("best_trial", best["number"], now, step)]
        tags = [
            RunTag("best.trial", str(best["number"])),
            RunTag("best.params", json.dumps(best["params"])),
            RunTag("best.run_id", best.get("run_id") or ""),
        ]
    client.log_batch(run_id, metrics=metrics, tags=tags)
    status = client.get_run(run_id).info.status
    if finished and status != "FINISHED":
        client.set_terminated(run_id, "FINISHED")
    elif not finished and status != "RUNNING":
        client.update_run(run_id, status="RUNNING")


class TrialRun:
    """The MLflow run of one trial, a child of the study's run."""

    def __init__(self, run_id: str):
        self.run_id = run_id

    @classmethod
    @tracked("the trial's run")
    def open(
        cls,
        params: DatasetParams,
        *,
        parent_run_id: str,
        study: str,
        number: int,
        values: dict,
        figures: dict,
        prepared: Prepared,
        worker: str,
    ) -> TrialRun:
        """Start trial `number`'s run under the study's: every param the trial trains with
        (`train.*` with the trial's values), its device counts and sample counts, lineage, and
        the worker (host:pid) that trains it; `prepared`: the prepared folder's description."""
        from mlflow.entities import Param

        client = store.client()
        experiment_id = client.get_run(parent_run_id).info.experiment_id
        tags = {
            **lineage.source_tags("tune", params.dataset),
            **lineage.lineage_tags([prepared.folder]),
            **lineage.framework_tags(),
            PARENT_TAG: parent_run_id,
            "pipeline.stage": "tune",
            "pipeline.dataset": params.dataset,
            STUDY_TAG: study,
            TRIAL_TAG: str(number),
            "optuna.params": json.dumps(values),
            "optuna.worker": worker,
        }
        run = client.create_run(experiment_id, run_name=f"{study}-trial-{number}", tags=tags)
        flat = {
            **params.flat(),
            **device_params(figures),
            "tune.trial": number,
            **{f"data.{split}_samples": prepared.samples(split) for split in ("train", "val")},
        }
        items = [Param(k, str(v)) for k, v in flat.items()]
        for start in range(0, len(items), 100):  # MLflow's limit of params per batch
            client.log_batch(run.info.run_id, params=items[start : start + 100])
        return cls(run.info.run_id)

    @tracked("an epoch's metrics")
    def log_epoch(self, epoch: int, row: dict) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        store.client().log_batch(
            self.run_id,
            metrics=[Metric(k, float(v), now, epoch) for k, v in row.items() if k != "epoch" and v is not None],
        )

    @tracked("the trial's end")
    def finish(
        self,
        state: str,
        *,
        epochs: int,
        value: Optional[float],
        metric: str,
        best_epoch: Optional[int] = None,
        reason: str = "",
    ) -> None:
        """End the run: its state (complete, pruned, failed) as tag optuna.state, the epochs it
        trained, and its value (`tune_<metric>`); a failed trial's run ends FAILED."""
        from mlflow.entities import Metric, RunTag

        now = int(time.time() * 1000)
        metrics = [Metric("epochs_trained", epochs, now, 0)]
        if value is not None:
            metrics.append(Metric(f"tune_{metric}", value, now, 0))
        if best_epoch is not None:
            metrics.append(Metric("best_epoch", best_epoch, now, 0))
        tags = [RunTag(STATE_TAG, state)] + ([RunTag("optuna.fail_reason", reason[:500])] if reason else [])
        client = store.client()
        client.log_batch(self.run_id, metrics=metrics, tags=tags)
        client.set_terminated(self.run_id, "FAILED" if state == "failed" else "FINISHED")
