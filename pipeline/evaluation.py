"""Test metrics, a per-class report and a confusion matrix."""

from __future__ import annotations

from typing import Optional

import numpy as np


def predict_logits(model, x: np.ndarray, *, batch_size: int, image_size: Optional[int] = None) -> np.ndarray:
    """Logits for every test sample, in order, through the same input pipeline as training."""
    from pipeline.data.inputs import make_dataset

    ds = make_dataset(x, np.zeros(len(x), np.int32), batch_size=batch_size, shuffle=False,
                      image_size=image_size).map(lambda features, _: features)
    return np.asarray(model.predict(ds, verbose=0))


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


def per_class_report(matrix: np.ndarray) -> list[dict]:
    """Precision, recall and support of each class (0.0 where undefined, with support shown)."""
    tp = np.diag(matrix).astype(float)
    predicted = matrix.sum(axis=0)
    actual = matrix.sum(axis=1)
    rows = []
    for c in range(len(matrix)):
        rows.append({
            "class": c,
            "precision": float(tp[c] / predicted[c]) if predicted[c] else 0.0,
            "recall": float(tp[c] / actual[c]) if actual[c] else 0.0,
            "support": int(actual[c]),
            "predicted": int(predicted[c]),
        })
    return rows


def macro_averages(report: list[dict]) -> dict:
    """Unweighted means of per-class precision and recall over the classes the test set has."""
    present = [r for r in report if r["support"]]
    return {
        "test_macro_precision": float(np.mean([r["precision"] for r in present])) if present else 0.0,
        "test_macro_recall": float(np.mean([r["recall"] for r in present])) if present else 0.0,
    }
