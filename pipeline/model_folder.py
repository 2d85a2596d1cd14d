"""The train stage's model folder (`models/<dataset>/`, its `--model-dir`), and the one module
that names its files:

    model.keras   the trained Keras model, with the best epoch's weights
    run.json      the MLflow run that trained it: {"run_id": "...", "experiment_id": "..."}

The train stage saves both at once (inside its atomic outputs); the evaluate stage loads the
model and reopens the run.
"""

from __future__ import annotations

from pathlib import Path

from pipeline.errors import DataError
from pipeline.io import read_json, reading, write_json

MODEL_FILE, RUN_FILE = "model.keras", "run.json"


def save(folder: Path, model, run_ids: dict) -> None:
    """The model and the ids of the MLflow run that trained it (`tracking.runs.TrainingRun.ids`)."""
    model.save(Path(folder) / MODEL_FILE)
    write_json(Path(folder) / RUN_FILE, run_ids)


def load_model(folder: Path):
    """The Keras model the train stage saved in `folder`, or a DataError saying to train it."""
    import keras

    path = Path(folder) / MODEL_FILE
    if not path.is_file():
        raise DataError(f"{path}: missing; run the train stage first")
    with reading(path, "not a loadable Keras model (run the train stage again)"):
        return keras.models.load_model(path)


def read_run(folder: Path) -> dict:
    """The MLflow ids the train stage wrote beside the model (`run_id`, `experiment_id`)."""
    path = Path(folder) / RUN_FILE
    ids = read_json(path)
    if not (isinstance(ids, dict) and isinstance(ids.get("run_id"), str) and ids["run_id"]):
        raise DataError(f"{path}: expected {{\"run_id\": \"...\", \"experiment_id\": \"...\"}}, as the "
                        f"train stage writes it; run the train stage again")
    return ids
