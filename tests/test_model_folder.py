"""pipeline/model_folder.py: the train stage's model folder saved and read back, and each way it
can be unfit for evaluate as one DataError naming the file."""

import json

import pytest

from pipeline import model_folder
from pipeline.errors import DataError


def test_a_saved_folder_gives_back_its_model_and_run(tmp_path):
    import keras
    import numpy as np

    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model_folder.save(tmp_path, model, {"run_id": "abc", "experiment_id": "1"})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.keras", "run.json"]
    assert model_folder.read_run(tmp_path) == {"run_id": "abc", "experiment_id": "1"}
    loaded = model_folder.load_model(tmp_path)
    x = np.ones((1, 3), "float32")
    assert np.allclose(loaded(x), model(x))


@pytest.mark.parametrize("files,read,message", [
    ({}, "load_model", "model.keras: missing; run the train stage first"),
    ({"model.keras": "not a zip"}, "load_model", "model.keras: not a loadable Keras model (run the train stage again)"),
    ({}, "read_run", "run.json: "),
    ({"run.json": json.dumps({"run_id": ""})}, "read_run",
     'run.json: expected {"run_id": "...", "experiment_id": "..."}, as the train stage writes it; run the train '
     "stage again"),
])
def test_a_folder_evaluate_cannot_use_is_a_data_error_naming_the_file(tmp_path, files, read, message):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(DataError) as caught:
        getattr(model_folder, read)(tmp_path)
    assert str(caught.value).startswith(f"{tmp_path}/{message}")
