"""The train stage's model folder (`models/<dataset>/`, its `--model-dir`), and the one module
that names its files:

    model.keras   the trained Keras model, with the best epoch's weights, and not its training
                  set-up (optimizer, its state, loss): Keras loads it alone, whatever loss
                  trained it; the same bytes whenever the weights are the same (no save date,
                  no memory addresses, fixed zip entry dates)
    run.json      the MLflow run that trained it: {"run_id": "...", "experiment_id": "...",
                  "model_sha256": "<model.keras's>"}; every training's own, so `.dvcignore`
                  keeps it out of the folder's hash in dvc.lock

The train stage saves both at once (inside its atomic outputs); the evaluate stage loads the
model and reopens the run, if run.json is this model's (after `dvc checkout` of another
commit's model it is the last training's, and is not used).
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Optional

from pipeline.errors import DataError
from pipeline.io import file_sha256, read_json, reading, write_json

MODEL_FILE, RUN_FILE = "model.keras", "run.json"


# a zip entry's date when the bytes must not say when they were written (zip's earliest)
_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)


def save(folder: Path, model, run_ids: dict) -> str:
    """The model and the ids of the MLflow run that trained it (`tracking.runs.TrainingRun.ids`),
    with the model file's digest, which it returns."""
    import keras

    path = Path(folder) / MODEL_FILE
    # the same layers and weights in a model never compiled: no optimizer, no loss
    keras.Model(_one_or_all(model.inputs), _one_or_all(model.outputs), name=model.name).save(path)
    _without_dates(path)
    digest = file_sha256(path)
    write_json(Path(folder) / RUN_FILE, {**run_ids, "model_sha256": digest})
    return digest


def _one_or_all(tensors: list):
    """A model's one input or output as itself, not a list of one (as it was built)."""
    return tensors[0] if len(tensors) == 1 else tensors


def model_sha256(folder: Path) -> str:
    """The digest of the folder's model file (what run.json and the training run's tag hold)."""
    return file_sha256(Path(folder) / MODEL_FILE)


def _without_dates(path: Path) -> None:
    """Rewrite Keras' zip with what it holds and nothing of when or where: metadata.json's
    `date_saved` dropped (Keras never reads it back), config.json's `shared_object_id`s (the
    shared objects' memory addresses) numbered in order of appearance, each entry dated
    _ZIP_EPOCH, in the same order."""
    with zipfile.ZipFile(path) as source:
        entries = [(info, source.read(info)) for info in source.infolist()]
    staged = path.with_name(f".{path.name}.dateless")
    with zipfile.ZipFile(staged, "w") as target:
        for info, data in entries:
            if info.filename == "metadata.json":
                metadata = json.loads(data)
                metadata.pop("date_saved", None)
                data = json.dumps(metadata, sort_keys=True).encode()
            elif info.filename == "config.json":
                data = json.dumps(_numbered_shared_objects(json.loads(data), {})).encode()
            fixed = zipfile.ZipInfo(info.filename, date_time=_ZIP_EPOCH)
            fixed.compress_type, fixed.external_attr = info.compress_type, 0o644 << 16
            target.writestr(fixed, data)
    staged.replace(path)


def _numbered_shared_objects(node, numbers: dict):
    """`node` with each `shared_object_id` replaced by its order of first appearance (Keras
    only matches them with each other when it loads the config)."""
    if isinstance(node, dict):
        return {
            key: (
                numbers.setdefault(value, len(numbers) + 1)
                if key == "shared_object_id"
                else _numbered_shared_objects(value, numbers)
            )
            for key, value in node.items()
        }
    if isinstance(node, list):
        return [_numbered_shared_objects(value, numbers) for value in node]
    return node


def load_model(folder: Path):
    """The Keras model the train stage saved in `folder`, or a DataError saying to train it."""
    import keras

    path = Path(folder) / MODEL_FILE
    if not path.is_file():
        raise DataError(f"{path}: missing; run the train stage first")
    with reading(path, "not a loadable Keras model (run the train stage again)"):
        return keras.models.load_model(path)


def read_run(folder: Path) -> Optional[dict]:
    """The MLflow ids the train stage wrote beside the model (`run_id`, `experiment_id`), or None
    when run.json is another model's (the model was checked out after a later training) or
    absent beside a model (DVC's cache holds no run.json)."""
    path = Path(folder) / RUN_FILE
    if not path.exists() and (Path(folder) / MODEL_FILE).is_file():
        return None
    ids = read_json(path)
    if not (isinstance(ids, dict) and isinstance(ids.get("run_id"), str) and ids["run_id"]):
        raise DataError(
            f'{path}: expected {{"run_id": "...", "experiment_id": "..."}}, as the '
            f"train stage writes it; run the train stage again"
        )
    model = Path(folder) / MODEL_FILE
    if ids.get("model_sha256") and model.is_file() and ids["model_sha256"] != model_sha256(folder):
        return None
    return ids
