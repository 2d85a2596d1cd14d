import numpy as np
import pytest

from pipeline.training import evaluation


def test_metrics_from_logits_match_definitions():
    logits = np.array([[2.0, 1.0, 0.0], [0.0, 3.0, 1.0], [1.0, 0.0, 5.0], [0.5, 2.0, 1.0]])
    y = np.array([0, 2, 2, 0])
    m = evaluation.metrics_from_logits(logits, y, top_k=2)
    probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    assert m["test_loss"] == pytest.approx(-np.log(probs[np.arange(4), y]).mean())
    assert m["test_accuracy"] == 0.5
    # sample 1: label 2 is second best -> in top 2; sample 3: label 0 is third -> not.
    assert m["test_top2_accuracy"] == 0.75
    assert m["test_samples"] == 4
    assert "test_top2_accuracy" not in evaluation.metrics_from_logits(logits, y)


def test_confusion_and_per_class_report():
    y_true = np.array([0, 0, 1, 1, 1, 2])
    y_pred = np.array([0, 1, 1, 1, 0, 1])
    matrix = evaluation.confusion_matrix(y_true, y_pred, 4)
    assert matrix.tolist() == [[1, 1, 0, 0], [1, 2, 0, 0], [0, 1, 0, 0], [0, 0, 0, 0]]
    report = evaluation.per_class_report(matrix)
    assert report[1] == {"class": 1, "precision": 0.5, "recall": pytest.approx(2 / 3), "support": 3, "predicted": 4}
    assert report[2]["precision"] == 0.0 and report[2]["recall"] == 0.0
    macro = evaluation.macro_averages(report)
    # class 3 has no test samples and is left out of the averages
    assert macro["test_macro_recall"] == pytest.approx((0.5 + 2 / 3 + 0) / 3)
