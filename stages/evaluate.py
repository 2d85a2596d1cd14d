"""evaluate: test metrics, per-class report and confusion matrix; logged into the training run
(or a run of its own when that run was evaluated before) with the model that takes raw inputs,
registered as a new version of the dataset's registered model."""

from __future__ import annotations

import click

from pipeline import log
from pipeline.config.loading.loader import load_params
from pipeline.serving import registry
from pipeline.tracking import lineage, probe, runs
from pipeline.training import model_folder
from stages._common import dataset_argument, params_option, path_option


@click.command("evaluate")
@dataset_argument
@path_option("--data", "Folder written by the preprocess stage.")
@path_option("--model-dir", "Folder written by the train stage.")
@path_option("--metrics", "JSON of test metrics, for dvc metrics.")
@path_option("--per-class", "CSV of per-class precision, recall and support.")
@path_option("--confusion", "CSV of (actual, predicted) per test sample, for dvc plots.")
@path_option("--confusion-png", "The confusion matrix as an image.")
@params_option
def command(dataset, data, model_dir, metrics, per_class, confusion, confusion_png, params_path):
    """Test metrics and confusion matrix; log into the training run."""
    params = load_params(params_path, dataset)
    cfg = params.evaluate
    # after the config is checked: classifier imports MLflow, evaluation TensorFlow
    from pipeline.data import prepared  # NumPy: after the config is checked
    from pipeline.serving import classifier
    from pipeline.training import evaluation  # NumPy: after the config is checked

    probe.check_tracking()  # every input checked before any output is written
    model_run = model_folder.read_run(model_dir)
    found = prepared.read(data)  # the folder's description, read once: every step below takes it
    classifier.check_inputs(found, params, str(params_path))  # what the logged model carries besides the test split
    ev = evaluation.evaluate(model_dir, found, cfg)
    evaluation.write_outputs(
        ev,
        metrics=metrics,
        per_class=per_class,
        confusion=confusion,
        confusion_png=confusion_png,
        title=f"{dataset}: test confusion matrix",
    )
    # run.json holds the digest when it is this model's (model_folder.read_run checked it)
    digest = (model_run or {}).get("model_sha256") or model_folder.model_sha256(model_dir)
    with runs.TrainingRun.for_evaluation(params, model_run, model_dir, digest) as run:
        run.log_evaluation(dataset, ev, [metrics, per_class, confusion_png])
        logged = classifier.log_model(params, model_dir, found, model=ev.model)
        version = registry.register(
            dataset,
            logged.model_uri,
            run.run_id,
            ev.metrics,
            ev.test_data,
            lineage.dvc_experiment(),
            model_id=logged.model_id,
        )
    log.result(
        f"{dataset}: "
        + ", ".join(f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}" for k, v in ev.metrics.items())
        + f"; registered model {dataset} version {version} (`pipeline promote {dataset}` to serve it)"
    )
