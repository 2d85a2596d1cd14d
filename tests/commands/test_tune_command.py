"""`pipeline tune` (pipeline/commands/tune.py) refusing what no study can run with, as a user runs
it: a storage of a scheme no study lives in, a study whose direction the params in force
contradict; one `error:` line, exit 2, before TensorFlow, nothing written. A study run for real
(workers, --best, --apply, several hosts): tests/scenarios/test_tune.py."""

import pytest
from support.processes import run_command, subprocess_env
from support.project import ROOT, write_params
from support.tracking import use_sqlite

from pipeline.config.loading.loader import load_params
from pipeline.tuning import studies


@pytest.mark.parametrize("url", ["ftp://host/optuna", "mysql://u@db/optuna", "redis://localhost:6379"])
def test_a_storage_no_study_can_live_in_is_a_usage_error_naming_those_that_work(tmp_path, url):
    write_params(tmp_path)
    result, code, imported = run_command(["tune", "reuters", "--storage", url], cwd=tmp_path)
    scheme = url.split("://")[0]
    assert code == 2 and "tensorflow" not in imported
    assert result.stderr.strip().splitlines() == [
        f"error: {url}: a study cannot live in a {scheme}:// storage: expected a journal file (a path, or "
        "file://PATH), sqlite:///PATH or postgresql://USER@HOST/DATABASE"
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["params.yaml"]


def test_a_study_of_a_validation_metric_without_a_validation_split_is_refused(tmp_path):
    """The labelled-texts template trains on every training text: a study has nothing to score
    its trials on, and says how to give it a split, before anything is opened or imported."""
    write_params(tmp_path)
    result, code, imported = run_command(
        [
            "tune",
            "reuters",
            "-S",
            "preprocess.reuters.validation_split=0",
            "-S",
            "train.reuters.early_stopping.monitor=loss",
        ],
        cwd=tmp_path,
    )
    assert code == 2 and "tensorflow" not in imported, result.stderr
    assert result.stderr.strip().splitlines() == [
        "error: params.yaml: tune.reuters.metric: val_accuracy needs a validation split, and "
        "preprocess.reuters.validation_split is 0 (every training sample trains the model): set it (0.1) and "
        "run `dvc repro preprocess@reuters` before tuning"
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["params.yaml"]


def test_pipeline_tune_refuses_another_direction_in_one_line_and_writes_nothing(tmp_path, monkeypatch):
    """As a user runs it: the study maximizes, the params in force minimize; one `error:` line,
    exit 2, before TensorFlow is imported, and the journal and the MLflow store as they were."""
    import numpy as np

    from pipeline.data import prepared
    from pipeline.kinds.labelled_texts import full_length_facts

    uri = use_sqlite(tmp_path, monkeypatch)
    x, y = np.ones((4, 3), dtype=np.int32), np.zeros(4, dtype=np.int32)
    data = tmp_path / "prepared"
    prepared.write_arrays(
        data, {"train": (x, y), "val": (x, y)}, input_="sequences", class_names=["a"], facts=full_length_facts(3, 5)
    )
    write_params(tmp_path)
    journal = tmp_path / "optuna.journal"
    studies.open_study(load_params(ROOT / "params.yaml", "reuters"), "reuters", str(journal))
    before, tracked = journal.read_bytes(), (tmp_path / "mlflow.db").read_bytes()
    result, code, imported = run_command(
        ["tune", "reuters", "--data", data, "--storage", journal, "-S", "tune.reuters.direction=minimize"],
        cwd=tmp_path,
        env=subprocess_env(MLFLOW_TRACKING_URI=uri),
    )
    assert code == 2 and "tensorflow" not in imported, result.stderr
    assert result.stderr.strip().splitlines() == [
        f"error: study 'reuters' in {journal} has another direction (Optuna's: maximize, not minimize): "
        "name a new study with --study, or put tune.reuters.direction back"
    ]
    assert journal.read_bytes() == before and (tmp_path / "mlflow.db").read_bytes() == tracked
