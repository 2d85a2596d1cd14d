"""The model a user gets: an MLflow pyfunc that answers raw inputs with labels and probabilities.

A model of texts takes a text (column `text`) or a sequence of word ids as Keras' `load_data`
gives Reuters' (`ids`); a model of images a PNG or JPEG of any size (`image`: bytes, base64 in
JSON) or an array of the prepared pictures' size of values 0-255 (`pixels`: grey, or RGB
triples). Each row gets its `label` (the dataset's own class name: a folder's, a label
column's value, a topic, a digit), `class`, `probability`, and its `top_k` labels with theirs;
a request's `params: {"top_k": N}` asks for another k.

The raw input becomes the model's input by the training's own code: `data.texts.encode_texts`
(the word index, indexing and padding the splits were made with), `data.images.picture`
(converted and resized as the prepared pictures were; `data.mnist.read_digit` for the reader
digits, which also makes a dark digit on a light ground light on dark) and `data.inputs.model_inputs`
(the scaling and resizing of the training's input pipeline). That code travels inside the
logged model (MLflow's `code_paths`), so a served model keeps the code it was trained with;
the model is defined from code (`pipeline/serving/model_code.py`, MLflow's models-from-code), not
pickled.

A bad row is a 400 answer whose reason names the row and what was expected, never a 500.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import mlflow.exceptions
import mlflow.pyfunc
import numpy as np
import pandas as pd
from mlflow.models import ModelSignature
from mlflow.types import ColSpec, DataType, ParamSchema, ParamSpec, Schema
from mlflow.types.schema import Array, Object, Property

import pipeline
from pipeline.errors import ConfigError
from pipeline.runtime import environment, imports
from pipeline.serving import forms
from pipeline.serving.forms import RequestError
from pipeline.tracking.store import tracked
from pipeline.training import model_folder

if TYPE_CHECKING:
    from pipeline.config.keys.schema import DatasetParams
    from pipeline.data.prepared import Prepared

# The distributions whose modules the served model's code (this module, pipeline.data's
# readers, pipeline.runtime.imports) imports when MLflow loads it and it predicts: with their own
# dependencies, the logged model's requirements (`model_requirements`). Both
# TensorFlow builds are named; the one installed is taken.
SERVED_MODEL_IMPORTS = ("mlflow", "tensorflow", "tensorflow-cpu", "keras", "numpy", "pandas", "pillow")

MODEL_ARTIFACT, SETTINGS_ARTIFACT = "model", "serving"
# rows per call of the Keras model: a large request is answered in slices of this size
SLICE = 256


class Classifier(mlflow.pyfunc.PythonModel):  # type: ignore[name-defined]  # MLflow loads it lazily
    """The pyfunc: `load_context` reads the Keras model and the settings, `predict` answers a
    DataFrame of raw inputs (MLflow builds it from the request and the signature given at
    logging time: a DataFrame type hint is one MLflow infers no signature from)."""

    def load_context(self, context):
        import keras

        imports.skip_keras_extras()
        self.settings = json.loads(Path(context.artifacts[SETTINGS_ARTIFACT]).read_text())
        self.model = keras.models.load_model(context.artifacts[MODEL_ARTIFACT])
        self.word_index = forms.word_index_of(context.artifacts)

    def predict(self, context, model_input: pd.DataFrame, params: Optional[dict] = None) -> pd.DataFrame:
        k = self._top_k(params)
        return answers(self._logits(self._inputs(model_input)), self.settings["labels"], k)

    def _top_k(self, params: Optional[dict]) -> int:
        k = (params or {}).get("top_k", self.settings["top_k"])
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= len(self.settings["labels"]):
            raise RequestError(f"params.top_k: expected an integer from 1 to {len(self.settings['labels'])}, got {k!r}")
        return int(k)

    @property
    def form(self):
        """What the model reads, by its settings' form of input."""
        return forms.of(self.settings)

    def _inputs(self, frame) -> np.ndarray:
        """The rows as the prepared splits hold samples (int32 sequences, uint8 images, float32 columns)."""
        return self.form.read(frame, self.settings, self.word_index)

    def _logits(self, x: np.ndarray) -> np.ndarray:
        from pipeline.data.inputs import model_inputs  # TensorFlow: only when this runs

        size = self.settings.get("model_image_size")
        return np.concatenate(
            [
                np.asarray(self.model.predict_on_batch(model_inputs(x[s : s + SLICE], size)))
                for s in range(0, len(x), SLICE)
            ]
        )


def probabilities(logits: np.ndarray) -> np.ndarray:
    """The softmax of each row of logits (the models end in logits)."""
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)


def answers(logits: np.ndarray, names: list[str], k: int):
    """Each row's label, class, probability and top k."""
    probs = probabilities(logits)
    order = np.argsort(-probs, axis=1, kind="stable")[:, :k]
    best = order[:, 0]
    return pd.DataFrame(
        {
            "label": [names[c] for c in best],
            "class": best.astype(np.int64),
            "probability": probs[np.arange(len(best)), best].astype(float),
            "top_k": [[{"label": names[c], "probability": float(p[c])} for c in row] for p, row in zip(probs, order)],
        }
    )


# --------------------------------------------------------------------------- logging


def signature(served: dict, top_k: int):
    """What MLflow shows and checks: the raw input columns of the served model's settings
    (`served`: its form's), the answer's columns, and the request param top_k."""
    columns: list = forms.of(served).signature_columns(served)  # ColSpecs: MLflow's Schema takes a list of them
    outputs: list = [
        ColSpec(DataType.string, "label"),
        ColSpec(DataType.long, "class"),
        ColSpec(DataType.double, "probability"),
        ColSpec(Array(Object([Property("label", DataType.string), Property("probability", DataType.double)])), "top_k"),
    ]
    return ModelSignature(
        inputs=Schema(columns), outputs=Schema(outputs), params=ParamSchema([ParamSpec("top_k", DataType.long, top_k)])
    )


def raw_rows(prepared: Prepared, count: int) -> list[dict]:
    """The first `count` samples of the test split of `prepared` (the prepared folder's
    description, as `pipeline.data.prepared.read` gives it) as a user has them: texts as text,
    pictures as PNG bytes. The input example; the load benchmark's."""
    prepared.check("test", digests=False)
    return forms.of(prepared).raw_rows(prepared.head("test", count)[0], prepared)


def example(prepared: Prepared):
    """A real input from the test split: its first text (60 words of it), or its first
    picture as PNG."""
    (row,) = raw_rows(prepared, 1)
    return pd.DataFrame([forms.of(prepared).example(row)])


def settings(dataset: str, model, prepared: Prepared, top_k: int) -> dict:
    """What `Classifier` reads at load time besides the model."""
    return {
        "dataset": dataset,
        "input": prepared.input,
        "labels": prepared.class_names,
        "top_k": min(top_k, prepared.num_classes),
        **forms.of(prepared).settings(prepared, model),
    }


def check_inputs(prepared: Prepared, params: Optional[DatasetParams] = None, source: str = "params.yaml") -> None:
    """Read what `log_model` will read from the prepared folder (`prepared`, its description)
    besides the test split (for texts the word index the served model encodes them with), so
    that the evaluate stage fails on them before it writes any output, not after."""
    forms.of(prepared).artifacts(prepared)  # the files the logged model carries, read
    for key, top_k in ((k, getattr(params, k).top_k) for k in ("evaluate", "serve") if params is not None):
        if top_k is not None and top_k > prepared.num_classes:
            assert params is not None
            classes = prepared.num_classes
            raise ConfigError(
                f"{source}: {key}.{params.dataset}.top_k: expected at most {classes} ({params.dataset} has "
                f"{classes} classes), got {top_k}"
            )


def model_requirements() -> list[str]:
    """The logged model's pip requirements: what its code imports when it loads and predicts
    (`SERVED_MODEL_IMPORTS`: MLflow, TensorFlow, Keras, NumPy, pandas, Pillow) and
    their own dependencies, at the exact versions installed here (after `make setup`,
    requirements.lock's pins), not the whole project's (DVC, Optuna, ...): `mlflow models
    serve --env-manager uv` or `build-docker` installs only what serving needs. Stated rather
    than inferred (inference reloads the model in a subprocess, which costs more than the rest
    of the logging)."""
    return environment.requirements_of(*SERVED_MODEL_IMPORTS)


@tracked("the model")
def log_model(params: DatasetParams, model_dir: Path, prepared: Prepared, model=None):
    """Log the model of `model_dir` (`model`: the same, loaded) as the pyfunc `model` of the
    active run, with serve.<dataset>.top_k as a param, and what it reads of the prepared
    folder (`prepared`); its ModelInfo."""
    import keras
    import tensorflow as tf

    dataset, top_k = params.dataset, params.serve.top_k
    mlflow.log_param(f"serve.{dataset}.top_k", top_k)

    model_path = Path(model_dir) / model_folder.MODEL_FILE
    with tempfile.TemporaryDirectory(prefix="pipeline-model-") as tmp:
        served = settings(dataset, model if model is not None else model_folder.load_model(model_dir), prepared, top_k)
        (Path(tmp) / "serving.json").write_text(json.dumps(served, indent=2))
        artifacts = {
            MODEL_ARTIFACT: str(model_path),
            SETTINGS_ARTIFACT: str(Path(tmp) / "serving.json"),
            **forms.of(prepared).artifacts(prepared),
        }
        # the check MLflow makes of the input example (loading the logged model) draws progress bars
        os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
        return mlflow.pyfunc.log_model(
            name="model",
            python_model=str(Path(__file__).with_name("model_code.py")),
            artifacts=artifacts,
            code_paths=[str(Path(pipeline.__file__).parent)],
            signature=signature(served, served["top_k"]),
            input_example=example(prepared),
            pip_requirements=model_requirements(),
            metadata={
                "keras_version": keras.__version__,
                "tensorflow_version": tf.__version__,
                "pipeline.dataset": dataset,
            },
        )
