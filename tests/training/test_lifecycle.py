"""The train stage's run: what it ends with, and what it checks before TensorFlow starts (the
whole run is the scenarios': tests/scenarios/test_e2e.py, test_faults.py, test_multiworker.py)."""

from types import SimpleNamespace

import numpy as np

from pipeline.config.keys.training import EarlyStoppingConfig
from pipeline.data import prepared
from pipeline.errors import DataError
from pipeline.kinds.labelled_texts import full_length_facts
from pipeline.training import lifecycle

FACTS = {"replicas": 2, "workers": 1, "strategy": "MirroredStrategy"}


def result(best: int, trained: int, restored: bool = True):
    history = [{"val_accuracy": 0.5 + e / 100} for e in range(1, trained + 1)]
    kept = best if restored and best else trained
    summary = {
        "best_epoch": best,
        "kept_epoch": kept,
        "epochs_trained": trained,
        "final_val_accuracy": history[-1]["val_accuracy"],
    }
    return SimpleNamespace(summary=summary, history=history, samples_per_second=1234.4)


def test_the_last_line_says_where_how_fast_and_the_best_epoch():
    line = lifecycle.result_line("reuters", 10, FACTS, result(best=4, trained=7), "abc")
    assert line == (
        "reuters: 2 replica(s) on 1 worker(s), MirroredStrategy, 1234 samples/s, best epoch 4 of 7 "
        "(val accuracy 0.5400; stopped early, 10 at most); MLflow run abc"
    )
    full = lifecycle.result_line("mnist", 3, FACTS, result(best=0, trained=3), None)
    assert full.endswith("best epoch 0 of 3 (val accuracy 0.5300); MLflow run None")
    unvalidated = result(best=2, trained=2)
    del unvalidated.summary["final_val_accuracy"]  # no validation split: the summary has no val_ figure
    line = lifecycle.result_line("notes", 5, FACTS, unvalidated, "abc")
    assert line.endswith("best epoch 2 of 2 (no validation split; stopped early, 5 at most); MLflow run abc")


def test_where_the_best_epoch_is_not_restored_the_line_gives_the_last_ones_figure_and_names_the_best():
    stopping = EarlyStoppingConfig("val_loss", "min", None, 0.0, restore_best_weights=False)
    line = lifecycle.result_line("emoji", 60, FACTS, result(best=16, trained=60, restored=False), "abc", stopping)
    assert line.endswith("last epoch 60 of 60 (val accuracy 1.1000; best val_loss at epoch 16); MLflow run abc")
    line = lifecycle.result_line("emoji", 60, FACTS, result(best=60, trained=60, restored=False), "abc", stopping)
    assert line.endswith("last epoch 60 of 60 (val accuracy 1.1000); MLflow run abc")
    restoring = EarlyStoppingConfig("val_loss", "min", None, 0.0, restore_best_weights=True)
    line = lifecycle.result_line("emoji", 60, FACTS, result(best=16, trained=60), "abc", restoring)
    assert line.endswith("best epoch 16 of 60 (val accuracy 0.6600); MLflow run abc")


def test_a_prepared_shard_missing_stops_the_run_before_tensorflow(tmp_path, monkeypatch):
    x = np.zeros((4, 3), np.int32)
    data = prepared.write_arrays(
        tmp_path / "p", {"train": (x, np.zeros(4, np.int32)), "val": (x, np.zeros(4, np.int32))},
        input_="sequences", class_names=["a", "b"], facts=full_length_facts(3, 5),
    )  # fmt: skip
    data.shard_paths("val")[0].unlink()
    params = SimpleNamespace(dataset="notes", train=SimpleNamespace())
    monkeypatch.setattr(lifecycle.distribute, "check_before_tensorflow", lambda cfg, where: None)
    outputs = lifecycle.Outputs(tmp_path / "m", tmp_path / "h.csv", tmp_path / "s.json", tmp_path / "c.png")
    try:
        lifecycle.run(params, prepared_dir=tmp_path / "p", outputs=outputs, backup_dir=None)  # type: ignore[arg-type]
    except DataError as exc:
        assert str(exc) == f"{data.shard_paths('val')[0]}: missing; run the preprocess stage again"
    else:
        raise AssertionError("the run went on without a shard")
    assert not (tmp_path / "m").exists()
