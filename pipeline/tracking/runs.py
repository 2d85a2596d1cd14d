"""The runs the pipeline logs: a training's (opened by the train stage, reopened or followed
by evaluate's) and a benchmark's. Every MLflow failure on the way is one TrackingError."""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from pipeline import log
from pipeline.tracking import lineage, probe, store
from pipeline.tracking.store import tracked

if TYPE_CHECKING:
    from pipeline.config.keys.schema import DatasetParams
    from pipeline.data.prepared import Prepared

# System metrics (CPU, memory, and GPU utilisation and memory with nvidia-ml-py) every few
# seconds: MLflow's default of 10 s leaves a short training with one or two points.
SYSTEM_METRICS_SECONDS = 2


def run_name(dataset: str, loop: str, replicas: int, workers: int, precision: str) -> str:
    """What a run is, at a glance in the runs table: `reuters-fit-2rep-float32`."""
    return f"{dataset}-{loop}-{replicas}rep{f'-{workers}w' if workers > 1 else ''}-{precision}"


def device_params(figures: dict) -> dict:
    """A run's device counts and strategy (`distribute.Setup.figures()`) as MLflow params."""
    return {
        ("devices." if key in ("physical_gpus", "logical_devices") else "distribute.") + key: value
        for key, value in figures.items()
    }


# the artifact of a run trained with class weights: each class's weight and training count
CLASS_WEIGHTS = "class_weights.json"


def class_weights(prepared: Prepared) -> dict:
    """What `CLASS_WEIGHTS` holds: the rule, then each class by name (in class order) with its
    count in the training split and its weight in the training loss (`Prepared.class_weights`,
    the weights the training applies)."""
    counts = prepared.split("train").class_counts
    weights = prepared.class_weights("train")
    return {
        "class_weight": "balanced",
        "rule": "train samples / (classes x the class's train samples)",
        "train_samples": prepared.samples("train"),
        "classes": {
            name: {"train_samples": count, "weight": weight}
            for name, count, weight in zip(prepared.class_names, counts, weights)
        },
    }


class TrainingRun:
    """The MLflow run of one training: opened by the train stage, reopened by evaluate.

    Under MultiWorkerMirroredStrategy only the chief logs: on every other worker the run is
    `TrainingRun(None)`, whose methods do nothing. Use it as a context manager: the run ends
    FINISHED, or FAILED when an exception leaves the block.
    """

    def __init__(self, active=None):
        self._active = active

    @classmethod
    def open(cls, dataset: str, name: str, *, chief: bool = True, run_id: Optional[str] = None) -> TrainingRun:
        """Start the training run of `dataset` (its experiment is named after it) with system
        metrics, or reopen `run_id` (a resumed training). The run is named after the DVC
        experiment under `dvc exp run`, else `name` and the short commit (`-dirty` when code
        differs from it); `name` stays in the tag `pipeline.run_name`."""
        if not chief:
            return cls(None)
        probe.check_tracking()

        import mlflow
        import mlflow.system_metrics

        if run_id is not None:
            store.use_store()
            return cls(mlflow.start_run(run_id=run_id))
        store.use_experiment(dataset)
        mlflow.system_metrics.set_system_metrics_sampling_interval(SYSTEM_METRICS_SECONDS)
        mlflow.system_metrics.set_system_metrics_samples_before_logging(1)
        # its start and stop notices are INFO lines on every run, and when the store stops
        # answering it warns on every sample: the training's own logging says it once
        logging.getLogger("mlflow.system_metrics").setLevel(logging.ERROR)
        active = mlflow.start_run(
            run_name=lineage.dvc_experiment() or f"{name}{lineage.commit_suffix()}",
            log_system_metrics=True,
            tags=lineage.source_tags("train", dataset),
        )
        mlflow.set_tag("pipeline.run_name", name)
        return cls(active)

    @classmethod
    def reopen(cls, run_id: str) -> TrainingRun:
        """The training run that the train stage recorded, to add evaluation results."""
        import mlflow

        store.use_store()
        return cls(mlflow.start_run(run_id=run_id))

    @classmethod
    def for_evaluation(
        cls, params: DatasetParams, model_ids: Optional[dict], model_dir: Path, digest: str
    ) -> TrainingRun:
        """The run that receives a model's evaluation.

        The training run, when this store has it and nothing has evaluated it yet: the train
        and evaluate stages of one `dvc repro` or `dvc exp run` make one row. Otherwise a new
        run in the dataset's experiment, so that no experiment changes another's row:
        - the model was evaluated before (an experiment that changed only evaluate's params
          or code, or whose training DVC restored from its run cache): the new run holds the
          training run's params with this evaluation's, its device counts, and metrics with
          their per-epoch history;
        - the store never saw the training (a clone whose models came from a DVC remote with
          `dvc pull`): the new run says where the model came from, and its file's digest.
        Without `model_ids` (the model folder's run.json, which DVC does not keep, is another
        training's or absent), the training run is the store's newest tagged with `digest`, the
        model file's.
        """
        run_id = model_ids["run_id"] if model_ids else None
        training = store.find_run(run_id) if run_id else store.run_that_trained(params.dataset, digest)
        if training is not None:
            run_id = training.info.run_id
        # evaluated: it has test metrics (pipeline.training.evaluation names them all test_*)
        if training is not None and not any(key.startswith("test_") for key in training.data.metrics):
            return cls.reopen(training.info.run_id)
        return cls(_evaluation_run(params, training, run_id, model_dir, digest))

    def __enter__(self) -> TrainingRun:
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

    @tracked("the end of the run")
    def _end(self, *exc):
        self._active.__exit__(*exc)  # FINISHED

    @property
    def run_id(self) -> Optional[str]:
        return self._active.info.run_id if self._active is not None else None

    @property
    def ids(self) -> dict:
        """What the train stage records in models/<dataset>/run.json."""
        return {"run_id": self.run_id, "experiment_id": self._active.info.experiment_id} if self._active else {}

    @tracked("the run's params and tags")
    def log_setup(self, params: DatasetParams, figures: dict, prepared: Prepared) -> None:
        """Every param of the dataset's stages, the devices and strategy, the sample counts,
        lineage and framework tags, the prepared data (`prepared`, its folder's description) as dataset inputs, and with
        `class_weight: balanced` each class's weight (`CLASS_WEIGHTS`)."""
        if self._active is None:
            return
        import mlflow

        # first: a class without a training sample is one error before anything is logged
        weights = class_weights(prepared) if params.train.class_weight == "balanced" else None
        mlflow.log_params(
            {
                **params.flat(),
                **device_params(figures),
                **{f"data.{split}_samples": prepared.samples(split) for split in ("train", "val")},
            }
        )
        unpinned = params.unpinned()
        warned = {"data.unpinned": "; ".join(unpinned)} if unpinned else {}
        mlflow.set_tags(
            {
                **lineage.lineage_tags([prepared.folder]),
                **lineage.fetch_tags(params.dataset),
                **lineage.framework_tags(),
                "pipeline.stage": "train",
                "pipeline.dataset": params.dataset,
                **warned,
            }
        )
        lineage.log_inputs(params.dataset, prepared, ("train", "val"))
        if weights is not None:
            mlflow.log_dict(weights, CLASS_WEIGHTS)

    @tracked("an epoch's metrics")
    def log_epoch(self, epoch: int, row: dict) -> None:
        if self._active is not None:
            import mlflow

            # without a validation split the row's val_ figures are NaN: none logged, as Keras'
            # History has none (history.csv keeps its columns, for the plots)
            figures = {k: v for k, v in row.items() if k != "epoch" and not (k.startswith("val_") and math.isnan(v))}
            mlflow.log_metrics(figures, step=epoch)

    @tracked("the training's summary")
    def log_training(self, result, *, weights_sha256: str, model_sha256: str, history: Path, curves: Path) -> None:
        """Time and throughput, the global batch, the digests of the weights and of the model
        file (what finds this run from a model DVC checked out), the history and the learning
        curves. The model is logged by evaluate (`log_model`), with its test figures."""
        if self._active is None:
            return
        import mlflow

        mlflow.log_param("train.global_batch_size", result.global_batch_size)
        mlflow.log_metrics(
            {
                "train_seconds": result.train_seconds,
                "samples_per_second": result.samples_per_second,
                "peak_rss_mb": round(result.peak_rss_mb),
                "best_epoch": result.summary["best_epoch"],
                "kept_epoch": result.summary["kept_epoch"],
                "epochs_trained": result.summary["epochs_trained"],
            }
        )
        mlflow.set_tags({"weights.sha256": weights_sha256, "model.sha256": model_sha256})
        mlflow.log_artifact(str(history))
        mlflow.log_artifact(str(curves), artifact_path="plots")

    @tracked("the evaluation")
    def log_evaluation(self, dataset: str, evaluation, artifacts: list[Path]) -> None:
        """Test metrics, the per-class table, the confusion matrix, the test split as a
        dataset input, and the evaluate stage's files under `evaluation/`."""
        if self._active is None:
            return
        import mlflow

        lineage.log_inputs(dataset, evaluation.prepared, ("test",))
        mlflow.log_metrics({k: v for k, v in evaluation.metrics.items() if k != "test_samples"})
        report = evaluation.report
        mlflow.log_table({k: [r[k] for r in report] for k in report[0]}, "evaluation/per_class.json")
        for path in artifacts:
            mlflow.log_artifact(str(path), artifact_path="evaluation")
        mlflow.log_dict(
            {"labels": list(range(len(evaluation.matrix))), "matrix": evaluation.matrix.tolist()},
            "evaluation/confusion_matrix.json",
        )


# The figures of `pipeline bench` that become MLflow metrics (the rest are params or tags).
BENCHMARK_METRICS = (
    "samples_per_second",
    "samples_per_second_per_replica",
    "flops_per_sample",
    "gflops",
    "peak_gflops",
    "percent_of_peak",
    "step_ms_median",
    "step_ms_p95",
    "input_wait_percent",
    "cpu_percent",
    "peak_rss_mb",
    "seconds",
    "scaling_efficiency",
)


@tracked("the benchmark")
def _evaluation_run(params: DatasetParams, training, run_id: Optional[str], model_dir: Path, digest: str):
    """A new run in the dataset's experiment for an evaluation that cannot go into the training
    run (`TrainingRun.for_evaluation`): with the training's params, tags and metrics when this
    store has that run, and where the model came from when it has not."""
    import mlflow

    store.use_experiment(params.dataset)
    name = lineage.dvc_experiment() or f"{params.dataset}-evaluation{lineage.commit_suffix()}"
    active = mlflow.start_run(run_name=name, tags=lineage.source_tags("evaluate", params.dataset))
    tags = {
        **lineage.lineage_tags([model_dir]),
        **lineage.framework_tags(),
        "pipeline.stage": "evaluate",
        "pipeline.dataset": params.dataset,
        "pipeline.model_sha256": digest,
        **({"pipeline.model_run_id": run_id} if run_id else {}),
    }
    if training is None:
        mlflow.log_params(params.flat())
        mlflow.set_tags(tags)
        if run_id:
            log.log.warning(
                "MLflow run %s, which trained %s, is not in this tracking store (%s); the "
                "evaluation is logged to a new run, %s, tagged with where the model came from",
                run_id,
                model_dir,
                store.tracking_uri(),
                active.info.run_id,
            )
        else:
            log.log.warning(
                "%s: no run of this tracking store (%s) trained this model (DVC keeps no "
                "run.json; its model.sha256 %s finds the training run in another store); the "
                "evaluation is logged to a new run, %s, tagged with where the model came from",
                model_dir,
                store.tracking_uri(),
                digest[:12],
                active.info.run_id,
            )
        return active
    copied = {
        k: v for k, v in training.data.tags.items() if k in COPIED_TAGS or k.startswith(("dvc.data.", "data.source."))
    }
    mlflow.set_tags({**copied, **tags})
    mlflow.log_params({**training.data.params, **{k: str(v) for k, v in params.flat().items()}})
    _copy_metrics(training.info.run_id, active.info.run_id, training.data.metrics)
    log.log.info(
        "%s was evaluated before, in MLflow run %s: this evaluation is a run of its own, %s",
        model_dir,
        run_id,
        active.info.run_id,
    )
    return active


def _log_benchmark(params: DatasetParams, figures: dict, name: str, prepared_dir: Path) -> str:
    import mlflow

    store.use_experiment(params.dataset)
    with mlflow.start_run(run_name=name, tags=lineage.source_tags("bench", params.dataset)) as run:
        settings = {k: v for k, v in figures.items() if k not in BENCHMARK_METRICS and k != "devices" and v is not None}
        mlflow.log_params({**params.flat(), **{f"bench.{k}": v for k, v in settings.items()}})
        # (no peak where the devices' is unknown: no metric rather than a made-up one)
        mlflow.log_metrics({f"bench.{k}": figures[k] for k in BENCHMARK_METRICS if figures.get(k) is not None})
        mlflow.set_tags(
            {
                **lineage.lineage_tags([prepared_dir]),
                **lineage.framework_tags(),
                "pipeline.stage": "bench",
                "pipeline.benchmark": "true",
                "pipeline.dataset": params.dataset,
                "bench.devices": ", ".join(figures["devices"]),
            }
        )
        return run.info.run_id


def log_benchmark(params: DatasetParams, figures: dict, prepared_dir: Path) -> str:
    """One run of `pipeline bench` in the dataset's experiment, tagged `pipeline.benchmark`
    (a filter: `tags.pipeline.benchmark = 'true'`) so that it compares with the others."""
    probe.check_tracking()
    name = f"bench-{params.dataset}-{figures['replicas']}rep-{figures['precision']}"
    return _log_benchmark(params, figures, name, prepared_dir)


@tracked("the scaling efficiency")
def log_scaling(results: list[dict]) -> None:
    """Each replica count's efficiency, computed once all were measured, into its run."""
    from mlflow import MlflowClient

    client = MlflowClient(store.tracking_uri())
    for result in results:
        if result.get("mlflow_run_id"):
            client.log_metric(result["mlflow_run_id"], "bench.scaling_efficiency", result["scaling_efficiency"])


COPIED_TAGS = ("weights.sha256", "model.sha256", "pipeline.run_name")


def _copy_metrics(source: str, dest: str, latest: dict) -> None:
    """The training's metrics of run `source`, each with its whole history: not its system
    metrics, nor the test metrics of its own evaluation."""
    from mlflow import MlflowClient

    client = MlflowClient(store.tracking_uri())
    history = [
        m for key in latest if not key.startswith(("system/", "test_")) for m in client.get_metric_history(source, key)
    ]
    for start in range(0, len(history), 1000):  # MLflow's limit per batch
        client.log_batch(dest, metrics=history[start : start + 1000])
