"""evaluate: test metrics, per-class report and confusion matrix; logged into the training run."""

from __future__ import annotations

import click

from pipeline.config import load_params
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
    """Evaluate DATASET's trained model on the test split."""
    cfg = load_params(params_path, dataset).evaluate
    from pipeline import tracking

    tracking.check_tracking()  # before any output is written: the results go into the run
    import csv

    import keras
    import mlflow
    import numpy as np

    from pipeline import evaluation, plots
    from pipeline.data import arrays
    from pipeline.errors import DataError
    from pipeline.io import atomic_file, read_json, write_json

    model_path = model_dir / "model.keras"
    if not model_path.is_file():
        raise DataError(f"{model_path}: missing; run the train stage first")
    model = keras.models.load_model(model_path)
    x_test, y_test = arrays.load_split(data, "test")
    stats = read_json(data / "stats.json")
    image_size = model.input_shape[1] if len(model.input_shape) == 4 else None
    logits = evaluation.predict_logits(model, x_test, batch_size=cfg.batch_size, image_size=image_size)
    results = evaluation.metrics_from_logits(logits, y_test, cfg.top_k)
    y_pred = logits.argmax(axis=1)
    matrix = evaluation.confusion_matrix(y_test, y_pred, stats["num_classes"])
    report = evaluation.per_class_report(matrix)

    results.update(evaluation.macro_averages(report))
    write_json(metrics, results)
    with atomic_file(per_class) as tmp, open(tmp, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(report[0]))
        writer.writeheader()
        writer.writerows(report)
    with atomic_file(confusion) as tmp:
        np.savetxt(tmp, np.stack([y_test, y_pred], axis=1), fmt="%d", delimiter=",",
                   header="actual,predicted", comments="")
    with atomic_file(confusion_png) as tmp:
        plots.confusion(matrix, tmp, f"{dataset}: test confusion matrix")

    run_id = read_json(model_dir / "run.json")["run_id"]
    with tracking.resume_run(run_id):
        tracking.log_inputs(dataset, data, {"test": (x_test, y_test)})
        mlflow.log_metrics({k: v for k, v in results.items() if k != "test_samples"})
        mlflow.log_table({k: [r[k] for r in report] for k in report[0]}, "evaluation/per_class.json")
        for path in (metrics, per_class, confusion_png):
            mlflow.log_artifact(str(path), artifact_path="evaluation")
        mlflow.log_dict({"labels": list(range(len(matrix))), "matrix": matrix.tolist()},
                        "evaluation/confusion_matrix.json")
    click.echo(f"{dataset}: " + ", ".join(f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}"
                                         for k, v in results.items()))
