"""pipeline/tuning/workers.py: a study's target reads the params file once; a worker process is
handed the params it works with, and a trial's drawn values are applied to them, not to the file
read again. (`pipeline tune` for real, trials and workers: tests/scenarios/test_tune.py.)"""

from __future__ import annotations

import json
from typing import Any, cast

import pytest
from support.project import write_params

from pipeline.config.loading import loader
from pipeline.errors import ConfigError
from pipeline.tuning import workers


def target(tmp_path, overrides=()):
    return workers.Target.make(
        "reuters", write_params(tmp_path), overrides, None, str(tmp_path / "s.journal"), tmp_path / "data"
    )


def test_the_target_reads_the_file_once_and_a_trial_draws_over_what_it_read(tmp_path, monkeypatch):
    made = target(tmp_path, ["train.reuters.epochs=3"])
    assert (made.dataset, made.study, made.params.train.epochs) == ("reuters", "reuters", 3)
    reads = []
    monkeypatch.setattr(loader, "read_yaml", lambda path: reads.append(path))
    (tmp_path / "params.yaml").unlink()  # nothing after make() reads it
    trial = made.trial_params({"learning_rate": 0.002, "conv1d.embedding_dim": 16})
    assert (trial.train.learning_rate, trial.train.settings.embedding_dim, trial.train.epochs) == (0.002, 16, 3)
    assert made.params.train.settings.embedding_dim != 16 or made.params.train.learning_rate != 0.002  # unchanged
    assert reads == []


def test_a_worker_process_gets_the_params_not_the_file(tmp_path):
    made = target(tmp_path, ["tune.reuters.trials=4"])
    spec = json.loads(json.dumps(made.spec()))  # as processes.run_many hands it over
    (tmp_path / "params.yaml").write_text("not: the params\n")
    again = workers.Target.from_spec(spec)
    assert again.params.tune == made.params.tune and again.params.train == made.params.train
    assert (again.overrides, again.study, again.storage, again.prepared_dir) == (
        made.overrides,
        made.study,
        made.storage,
        made.prepared_dir,
    )


def test_drawn_values_the_config_rejects_are_a_config_error_naming_the_key(tmp_path):
    made = target(tmp_path)
    with pytest.raises(ConfigError, match=r"train\.reuters\.learning_rate: expected"):
        made.trial_params({"learning_rate": -1.0})


@pytest.mark.parametrize("kept, value", [(2, 0.6), (3, 0.5)])
def test_a_trials_value_is_that_of_the_epoch_whose_weights_the_model_has(tmp_path, monkeypatch, kept, value):
    """The kept epoch's: the best one (by the monitor, here epoch 2) where restore_best_weights
    put it back, else the last one (the training's summary says which)."""
    from types import SimpleNamespace

    import optuna

    study = optuna.create_study(direction="maximize")
    finished: dict = {}
    run = SimpleNamespace(finish=lambda state, **figures: finished.update(state=state, **figures))
    # nothing but the study is used by the telling: the rest of what a worker holds is not needed
    opened: Any = SimpleNamespace(study=study)
    trial = workers.Trial(target(tmp_path), opened, None, cast(Any, None))
    trial.shown = "learning_rate=0.01"
    monkeypatch.setattr(workers, "_record", lambda target, opened: None)  # the study's MLflow run: none here
    history = [{"val_accuracy": 0.4}, {"val_accuracy": 0.6}, {"val_accuracy": 0.5}]
    result = SimpleNamespace(summary={"best_epoch": 2, "kept_epoch": kept}, history=history)
    trial._tell(study.ask(), run, result)
    assert study.trials[0].value == value
    assert (finished["state"], finished["value"], finished["best_epoch"]) == ("complete", value, 2)
