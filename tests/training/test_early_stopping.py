"""The best epoch, early stopping and the restore of the best epoch's weights."""

import json
import math
import subprocess
import sys

import pytest
from support.processes import subprocess_env
from support.project import ROOT

from pipeline.config.keys.training import EarlyStoppingConfig
from pipeline.training.early_stopping import best_epoch, kept_epoch, should_stop

WORKER = ROOT / "tests" / "workers" / "train_case.py"


def rule(**changes):
    values = dict(monitor="val_accuracy", mode="max", patience=2, min_delta=0.0, restore_best_weights=True)
    return EarlyStoppingConfig(**{**values, **changes})


def rows(*values, key="val_accuracy"):
    return [{"epoch": i + 1, key: v} for i, v in enumerate(values)]


def test_best_epoch_follows_the_mode_and_the_first_of_equals_wins():
    history = rows(0.5, 0.7, 0.7, 0.6)
    assert best_epoch(history, rule()) == 2
    assert best_epoch(rows(0.9, 0.4, 0.4, key="val_loss"), rule(monitor="val_loss", mode="min")) == 2
    assert best_epoch([], rule()) == 0


def test_an_improvement_must_exceed_min_delta():
    history = rows(0.50, 0.505, 0.52)
    assert best_epoch(history, rule(min_delta=0.01)) == 3
    assert best_epoch(history[:2], rule(min_delta=0.01)) == 1
    assert best_epoch(history, rule()) == 3


def test_epochs_without_a_value_do_not_count():
    assert best_epoch(rows(math.nan, 0.3, math.nan), rule()) == 2
    assert best_epoch(rows(math.nan, math.nan), rule()) == 0


def test_training_stops_after_patience_epochs_without_improvement():
    assert not should_stop(rows(0.5, 0.7, 0.6), rule(patience=2))
    assert should_stop(rows(0.5, 0.7, 0.6, 0.65), rule(patience=2))
    assert should_stop(rows(0.5, 0.4), rule(patience=1))
    assert not should_stop(rows(0.5, 0.4, 0.3, 0.2), rule(patience=None))  # null: never
    assert not should_stop([], rule())


def test_the_model_keeps_the_best_epochs_weights_only_where_they_are_restored():
    assert kept_epoch(best=16, trained=60, restore_best_weights=True) == 16
    assert kept_epoch(best=16, trained=60, restore_best_weights=False) == 60
    assert kept_epoch(best=0, trained=60, restore_best_weights=True) == 60  # no epoch had a figure


def case(tmp_path, *args):
    out = tmp_path / f"case-{len(list(tmp_path.glob('case-*')))}.json"
    result = subprocess.run(
        [sys.executable, str(WORKER), "early", *map(str, args[:2]), out, *map(str, args[2:])],
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(out.read_text())


@pytest.mark.slow
@pytest.mark.distributed
@pytest.mark.parametrize("loop", ["fit", "custom"])
def test_both_loops_stop_and_restore_the_best_epoch_on_two_replicas(tmp_path, loop):
    # monitor the training loss with mode max: the first epoch is the best, and patience 2
    # stops the run after the third of six epochs
    restored = case(tmp_path, loop, 2, "true")
    assert [r["epoch"] for r in restored["history"]] == [1, 2, 3]
    assert restored["published"] == [1, 2, 3]
    summary = restored["summary"]
    assert (summary["best_epoch"], summary["kept_epoch"], summary["epochs_trained"]) == (1, 1, 3)
    val_losses = [r["val_loss"] for r in restored["history"]]
    assert val_losses[0] != pytest.approx(val_losses[-1], rel=1e-3)
    # the model returned is the first epoch's: its own validation loss is that epoch's
    assert restored["own_val_loss"] == pytest.approx(val_losses[0], rel=1e-4)

    kept_last = case(tmp_path, loop, 2, "false")
    assert kept_last["summary"]["best_epoch"] == 1  # recorded either way
    assert kept_last["summary"]["kept_epoch"] == 3
    assert kept_last["own_val_loss"] == pytest.approx(kept_last["history"][-1]["val_loss"], rel=1e-4)


@pytest.mark.slow
@pytest.mark.distributed
@pytest.mark.parametrize("loop", ["fit", "custom"])
def test_a_run_resumed_after_it_stopped_trains_no_further_epoch(tmp_path, loop):
    """Killed after it stopped early and before it finished, the rerun trains nothing more and
    still ends with the best epoch's weights, kept in the backup."""
    first = case(tmp_path, loop, 2, "true", tmp_path / "backup")
    assert [r["epoch"] for r in first["history"]] == [1, 2, 3]
    assert sorted(p.name for p in (tmp_path / "backup" / "best").iterdir()) == ["best-1.npz"]
    again = case(tmp_path, loop, 2, "true", tmp_path / "backup")
    assert [r["epoch"] for r in again["history"]] == [1, 2, 3]
    assert again["history"] == first["history"]
    assert again["published"] == []  # every epoch was handed to MLflow by the first process
    assert again["own_val_loss"] == pytest.approx(first["history"][0]["val_loss"], rel=1e-4)
