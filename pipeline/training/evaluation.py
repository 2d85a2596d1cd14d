"""The evaluate stage's work: test metrics, a per-class report and a confusion matrix of a
trained model, and the files they are written to."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import numpy as np

from pipeline.io import atomic_outputs, write_csv, write_json
from pipeline.training import model_folder, plots

if TYPE_CHECKING:
    from pipeline.config.keys.schema import EvaluateConfig
    from pipeline.data.prepared import Prepared, SplitTap


@dataclass
class Evaluation:
    metrics: dict  # test_loss, test_accuracy, [test_topK_accuracy], macro averages, test_samples
    report: list[dict]  # per class: its name, precision, recall, support, predicted
    matrix: np.ndarray  # counts[actual, predicted]
    prepared: Prepared  # the prepared folder's description
    y_true: np.ndarray
    y_pred: np.ndarray
    test_data: str  # the test split's digest: versions compare on the same data
    model: object = None  # the Keras model evaluated


def evaluate(model_dir: Path, prepared: Prepared, cfg: EvaluateConfig) -> Evaluation:
    """Run the train stage's model over the test split of `prepared` (the prepared folder's
    description, as `pipeline.data.prepared.read` gives it), streamed (an EvaluateConfig's batch size and top k)."""
    model = model_folder.load_model(model_dir)
    prepared.check("test", digests=False)  # there, and of their sizes: their sha256 as they are read
    logits, y, digest = logits_of_test_split(model, prepared, cfg)
    metrics = metrics_from_logits(logits, y, cfg.top_k)
    y_pred = logits.argmax(axis=1)
    matrix = confusion_matrix(y, y_pred, prepared.num_classes)
    report = per_class_report(matrix, prepared.class_names)
    metrics.update(macro_averages(report))
    return Evaluation(metrics, report, matrix, prepared, y, y_pred, digest, model)


def logits_of_test_split(model, prepared: Prepared, cfg: EvaluateConfig) -> tuple[np.ndarray, np.ndarray, str]:
    """`model`'s logits for every test sample of `prepared`, in order, in batches of `cfg`'s; the
    samples' labels, and the sha256 of the records read (the test split as the model saw it)."""
    from pipeline.data.inputs import image_size_for  # TensorFlow: only when this runs

    tap = prepared.tap("test")
    logits = predict_logits(
        model, prepared, batch_size=cfg.batch_size, image_size=image_size_for(prepared, model), tap=tap
    )
    digest, y = tap.finish()
    return logits, y, digest


def write_outputs(
    ev: Evaluation, *, metrics: Path, per_class: Path, confusion: Path, confusion_png: Path, title: str
) -> None:
    """The metrics JSON (for dvc metrics), the per-class CSV, the (actual, predicted) CSV (for
    dvc plots; each class by its name, as the per-class CSV names them) and the confusion
    matrix as an image."""
    names = ev.prepared.class_names
    with atomic_outputs(metrics, per_class, confusion, confusion_png) as (m_tmp, pc_tmp, c_tmp, png_tmp):
        write_json(m_tmp, ev.metrics)
        write_csv(pc_tmp, ev.report, ev.report[0])
        write_csv(
            c_tmp,
            [{"actual": names[int(a)], "predicted": names[int(p)]} for a, p in zip(ev.y_true, ev.y_pred)],
            ("actual", "predicted"),
        )
        plots.confusion(ev.matrix, png_tmp, title, names)


def predict_logits(
    model, prepared: Prepared, *, batch_size: int, image_size: Optional[int] = None, tap: Optional[SplitTap] = None
) -> np.ndarray:
    """Logits for every test sample, in order, through the same input pipeline as training
    (which shows `tap` the records it reads)."""
    from pipeline.data.inputs import make_dataset  # TensorFlow: only when this runs

    ds = make_dataset(prepared, "test", batch_size=batch_size, shuffle=False, image_size=image_size, tap=tap)
    return np.asarray(model.predict(ds.map(lambda features, _: features), verbose=0))


def metrics_from_logits(logits: np.ndarray, y: np.ndarray, top_k: Optional[int] = None) -> dict:
    """Mean cross-entropy (from logits), accuracy and, if asked, top-k accuracy."""
    y = y.astype(np.int64)
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    metrics = {
        "test_loss": float(-log_probs[np.arange(len(y)), y].mean()),
        "test_accuracy": float((logits.argmax(axis=1) == y).mean()),
        "test_samples": int(len(y)),
    }
    if top_k:
        # A label counts as in the top k when fewer than k classes score strictly higher.
        target = logits[np.arange(len(y)), y][:, None]
        metrics[f"test_top{top_k}_accuracy"] = float(((logits > target).sum(axis=1) < top_k).mean())
    return metrics


def confusion_matrix(y_true: np.ndarray, y_pred: np.ndarray, num_classes: int) -> np.ndarray:
    """counts[actual, predicted]."""
    matrix = np.zeros((num_classes, num_classes), dtype=np.int64)
    np.add.at(matrix, (y_true.astype(np.int64), y_pred.astype(np.int64)), 1)
    return matrix


def per_class_report(matrix: np.ndarray, class_names: list[str]) -> list[dict]:
    """Each class's name (as the training folder or column named it), precision, recall and
    support (0.0 where undefined, with support shown), in the classes' order."""
    tp = np.diag(matrix).astype(float)
    predicted = matrix.sum(axis=0)
    actual = matrix.sum(axis=1)
    rows = []
    for c in range(len(matrix)):
        rows.append(
            {
                "class": class_names[c],
                "precision": float(tp[c] / predicted[c]) if predicted[c] else 0.0,
                "recall": float(tp[c] / actual[c]) if actual[c] else 0.0,
                "support": int(actual[c]),
                "predicted": int(predicted[c]),
            }
        )
    return rows


def macro_averages(report: list[dict]) -> dict:
    """Unweighted means of per-class precision and recall over the classes the test set has."""
    present = [r for r in report if r["support"]]
    return {
        "test_macro_precision": float(np.mean([r["precision"] for r in present])) if present else 0.0,
        "test_macro_recall": float(np.mean([r["recall"] for r in present])) if present else 0.0,
    }
