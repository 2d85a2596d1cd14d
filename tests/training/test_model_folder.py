"""pipeline/training/model_folder.py: the train stage's model folder saved and read back, and each way it
can be unfit for evaluate as one DataError naming the file."""

import json

import pytest

from pipeline.errors import DataError
from pipeline.training import model_folder


def test_a_saved_folder_gives_back_its_model_and_run(tmp_path):
    import keras
    import numpy as np

    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model_folder.save(tmp_path, model, {"run_id": "abc", "experiment_id": "1"})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.keras", "run.json"]
    digest = model_folder.model_sha256(tmp_path)
    assert model_folder.read_run(tmp_path) == {"run_id": "abc", "experiment_id": "1", "model_sha256": digest}
    loaded = model_folder.load_model(tmp_path)
    x = np.ones((1, 3), "float32")
    assert np.allclose(loaded(x), model(x))


def test_the_saved_model_loads_in_keras_alone_whatever_loss_trained_it(tmp_path):
    """train.<ds>.loss squared_hinge is the pipeline's own class, which Keras cannot load: the file
    holds the model without its training set-up (optimizer, loss), for the served model and for
    a user's keras.models.load_model."""
    import keras
    import numpy as np

    from pipeline.training import models

    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile("adam", models.loss("squared_hinge"))
    x = np.arange(12, dtype="float32").reshape(4, 3)
    model.fit(x, np.array([0, 1, 0, 1]), verbose=0)
    model_folder.save(tmp_path, model, {"run_id": "abc"})
    loaded = keras.models.load_model(tmp_path / "model.keras")
    assert not loaded.compiled  # neither optimizer nor loss
    np.testing.assert_allclose(loaded(x), model(x), rtol=1e-6)


def test_the_same_weights_are_the_same_file_however_long_the_optimizer_ran(tmp_path):
    """The file holds the model, not the optimizer's state: a training that ends on the weights
    of an earlier one (its best epoch the same) saves the same bytes, and DVC need not evaluate
    it again."""
    import keras
    import numpy as np

    x, y = np.arange(12, dtype="float32").reshape(4, 3), np.array([0, 1, 0, 1])
    digests = []
    for steps in (1, 3):
        keras.utils.set_random_seed(0)
        inputs = keras.Input((3,), name="x")
        model = keras.Model(inputs, keras.layers.Dense(2, name="logits")(inputs), name="same")
        model.compile("adam", "sparse_categorical_crossentropy")
        start = [w.copy() for w in model.get_weights()]
        model.fit(x, y, epochs=steps, verbose=0)  # the optimizer's iterations and slots differ
        model.set_weights(start)  # the best epoch restored
        (tmp_path / str(steps)).mkdir()
        digests.append(model_folder.save(tmp_path / str(steps), model, {"run_id": str(steps)}))
    assert digests[0] == digests[1]
    loaded = model_folder.load_model(tmp_path / "1")
    assert loaded.output.shape == (None, 2)  # one output, as trained, not a list of one


def test_a_run_json_of_another_model_or_none_names_no_run(tmp_path):
    """DVC keeps no run.json (.dvcignore): after `dvc checkout` of another commit's model the
    file beside it is the last training's, or absent after `dvc pull`; neither is this model's run."""
    import keras

    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    model_folder.save(tmp_path / "a", keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)]), {"run_id": "a"})
    model_folder.save(tmp_path / "b", keras.Sequential([keras.Input((3,)), keras.layers.Dense(4)]), {"run_id": "b"})
    (tmp_path / "b" / "run.json").replace(tmp_path / "a" / "run.json")
    assert model_folder.read_run(tmp_path / "a") is None
    assert model_folder.read_run(tmp_path / "b") is None


@pytest.mark.parametrize(
    "files,read,message",
    [
        ({}, "load_model", "model.keras: missing; run the train stage first"),
        (
            {"model.keras": "not a zip"},
            "load_model",
            "model.keras: not a loadable Keras model (run the train stage again)",
        ),
        ({}, "read_run", "run.json: "),
        (
            {"run.json": json.dumps({"run_id": ""})},
            "read_run",
            'run.json: expected {"run_id": "...", "experiment_id": "..."}, as the train stage writes it; run the train '
            "stage again",
        ),
    ],
)
def test_a_folder_evaluate_cannot_use_is_a_data_error_naming_the_file(tmp_path, files, read, message):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(DataError) as caught:
        getattr(model_folder, read)(tmp_path)
    assert str(caught.value).startswith(f"{tmp_path}/{message}")


def test_the_same_model_saved_twice_is_the_same_bytes(tmp_path):
    """What makes a rerun that reproduces leave dvc.lock as it was: no save date, zip entries
    dated alike, and config.json's shared objects numbered, not named by their memory address
    (which differs between two processes, as between two models here)."""
    import time
    import zipfile

    import keras

    def model():
        keras.utils.set_random_seed(1)
        policy = keras.DTypePolicy("float32")  # one object both layers share, as Keras' own default
        inputs = keras.Input((3,), name="x")
        hidden = keras.layers.Dense(4, name="hidden", dtype=policy)(inputs)
        return keras.Model(inputs, keras.layers.Dense(2, name="out", dtype=policy)(hidden), name="m")

    first, second = model(), model()
    for folder, built in (("a", first), ("b", second)):
        (tmp_path / folder).mkdir()
        model_folder.save(tmp_path / folder, built, {"run_id": folder})
        time.sleep(2.1)  # a zip entry's date has a 2 s resolution
    a, b = (tmp_path / "a" / "model.keras").read_bytes(), (tmp_path / "b" / "model.keras").read_bytes()
    assert b'"shared_object_id": 1' in zipfile.ZipFile(tmp_path / "a" / "model.keras").read("config.json")
    assert a == b
    loaded = model_folder.load_model(tmp_path / "b")
    assert [layer.name for layer in loaded.layers] == ["x", "hidden", "out"]
    assert all((w == v).all() for w, v in zip(loaded.get_weights(), second.get_weights()))
