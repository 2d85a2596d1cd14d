"""What a served model reads, by the kind of its dataset (`pipeline.kinds`, found by the
form of its samples, `Prepared.input`): each kind's is one class here (its request columns, its
signature, the settings and files the model carries, how a raw row becomes a prepared sample,
and the input example), which the kind names (`Kind.served`). The pyfunc (`classifier`) asks
the form; it never tests which one it is.

Texts: a text (column `text`, encoded by `data.texts.encode_texts` with the dataset's word
index) or a sequence of word ids as Keras' `load_data` gives Reuters' (`ids`). Pictures: a PNG
or JPEG of any size (`image`: bytes, base64 in JSON; `data.images.picture`, or
`data.mnist.read_digit` for the reader digits) or an array of the prepared pictures' size of
values 0-255 (`pixels`).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import io
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Optional, cast

import mlflow.exceptions
import numpy as np
import pandas as pd
from mlflow.protos.databricks_pb2 import INVALID_PARAMETER_VALUE
from mlflow.types import ColSpec, DataType
from mlflow.types.schema import AnyType, Array

from pipeline.data import images, mnist, tabular, texts
from pipeline.errors import DataError
from pipeline.kinds import labelled_texts
from pipeline.kinds.known import FORMS
from pipeline.kinds.tables import NumericColumn

if TYPE_CHECKING:
    from pipeline.data.prepared import Prepared
    from pipeline.kinds.image_folders import ImageFoldersFacts
    from pipeline.kinds.labelled_texts import LabelledTextsFacts
    from pipeline.kinds.tables import TableFacts

# the first bytes of a PNG and of a JPEG file
IMAGE_MAGIC = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff")
WORD_INDEX_ARTIFACT = "word_index"


class RequestError(mlflow.exceptions.MlflowException):
    """A request the model cannot read: MLflow's server answers it with a 400 and this message.

    MLflow's server puts the whole request in front of a model's message ("Failed to predict
    data '...'"; a megabyte for an image) by setting `message`; this one keeps its one line."""

    def __init__(self, reason: str):
        self._reason = reason
        super().__init__(reason, error_code=INVALID_PARAMETER_VALUE)

    @property
    def message(self) -> str:
        return self._reason

    @message.setter
    def message(self, _value) -> None:
        pass


class Texts:
    """Sequences of word ids, read from a text or from ids."""

    columns = ("text", "ids")

    def read(self, frame, settings: dict, word_index: Optional[dict]) -> np.ndarray:
        return self.inputs(either(frame, self.columns), settings, word_index)

    def signature_columns(self, settings: dict) -> list:
        return [
            ColSpec(DataType.string, "text", required=False),
            ColSpec(Array(DataType.long), "ids", required=False),
        ]

    def settings(self, prepared: Prepared[LabelledTextsFacts], model) -> dict:
        facts = prepared.facts
        return {
            "encoding": {**dataclasses.asdict(facts.encoding), "max_len": facts.max_len, "vocab_size": facts.vocab_size}
        }

    def artifacts(self, prepared: Prepared[LabelledTextsFacts]) -> dict:
        """The files the served model carries besides the Keras model: the word index, read
        (checked) first."""
        path = self._word_index(prepared)
        labelled_texts.load_word_index(path)
        return {WORD_INDEX_ARTIFACT: str(path)}

    def _word_index(self, prepared: Prepared[LabelledTextsFacts]) -> Path:
        """The word index's file in the prepared folder (random ids, selftest's, have none)."""
        if prepared.facts.word_index is None:
            raise DataError(f"{prepared.folder}: its texts have no word index, which a served model reads")
        return prepared.folder / prepared.facts.word_index

    def inputs(self, rows: list, settings: dict, word_index: Optional[dict]) -> np.ndarray:
        enc = settings["encoding"]
        cfg = cast(texts.Encoding, SimpleNamespace(**enc))  # the encoding keys, as preprocess wrote them
        out = np.zeros((len(rows), cfg.max_len), np.int32)
        for i, (column, value) in enumerate(rows):
            if column == "text":
                if not isinstance(value, str):
                    raise RequestError(
                        f"row {i}: text: expected a string, got {kind_of(value)} (one object per "
                        f'row: {{"inputs": [{{"text": "..."}}, ...]}})'
                    )
                if not texts.words(value):
                    raise RequestError(
                        f"row {i}: text: expected a text's words, got "
                        f"{'an empty text' if not value.strip() else repr(value[:40])}"
                    )
                assert word_index is not None  # logged with every model of texts
                out[i] = texts.encode_texts([value], word_index, cfg, enc["vocab_size"])[0]
            else:
                ids = integers(value, f"row {i}: ids", "a list of word ids (non-negative integers)", 1)
                if ids.size == 0:
                    raise RequestError(f"row {i}: ids: expected a list of word ids, got an empty list")
                out[i] = texts.encode_sequences([ids], cfg, enc["vocab_size"])[0]
        return out

    def raw_rows(self, x: np.ndarray, prepared: Prepared[LabelledTextsFacts]) -> list[dict]:
        """Prepared samples as a user has them: texts."""
        index = labelled_texts.load_word_index(self._word_index(prepared))
        return [{"text": text} for text in texts.texts(x, index, prepared.facts.encoding.index_from)]

    def example(self, row: dict) -> dict:
        return {"text": " ".join(row["text"].split()[:60])}  # 60 words of it


class Pictures:
    """uint8 pictures, read from a PNG or JPEG or from pixel values."""

    columns = ("image", "pixels")

    def read(self, frame, settings: dict, word_index: Optional[dict]) -> np.ndarray:
        return self.inputs(either(frame, self.columns), settings, word_index)

    def signature_columns(self, settings: dict) -> list:
        return [
            ColSpec(DataType.binary, "image", required=False),
            ColSpec(Array(Array(DataType.long)), "pixels", required=False),
        ]

    def settings(self, prepared: Prepared[ImageFoldersFacts], model) -> dict:
        facts = prepared.facts
        return {
            "image_size": facts.image_size,
            "color": facts.color,
            "reader": facts.reader,
            "model_image_size": int(model.input_shape[1]),
        }

    def artifacts(self, prepared: Prepared[ImageFoldersFacts]) -> dict:
        return {}

    def inputs(self, rows: list, settings: dict, word_index: Optional[dict]) -> np.ndarray:
        return np.stack([self._image(i, column, value, settings) for i, (column, value) in enumerate(rows)])

    def _image(self, i: int, column: str, value, settings: dict) -> np.ndarray:
        size, color = settings["image_size"], settings["color"]
        if column == "pixels":
            shape, what = ((size, size), "grey values") if color == "grey" else ((size, size, 3), "RGB values")
            expected = f"a {'x'.join(map(str, shape))} array of {what} 0-255"
            pixels = integers(value, f"row {i}: pixels", expected, len(shape))
            if pixels.shape != shape or pixels.max(initial=0) > 255:
                raise RequestError(
                    f"row {i}: pixels: expected {expected}, "
                    f"got {'x'.join(map(str, pixels.shape))} values {pixels.min(initial=0)}.."
                    f"{pixels.max(initial=0)}"
                )
            return pixels.astype(np.uint8)
        if isinstance(value, str):
            value = value.encode("ascii", "replace")
        if not isinstance(value, (bytes, bytearray)) or not value:
            raise RequestError(f"row {i}: image: expected PNG or JPEG bytes (base64 in JSON), got {kind_of(value)}")
        value = bytes(value)
        if not value.startswith(IMAGE_MAGIC):
            # still base64: MLflow decodes it from `dataframe_records` and `dataframe_split`, not
            # from `inputs`, where it hands over the text's bytes
            try:
                value = base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError):
                pass  # neither: read_digit says what it is not
        try:
            if settings["reader"] == "digits":
                return mnist.read_digit(value, f"row {i}: image", size)
            return images.picture(value, f"row {i}: image", size, color)
        except DataError as exc:
            raise RequestError(str(exc)) from None

    def raw_rows(self, x: np.ndarray, prepared: Prepared[ImageFoldersFacts]) -> list[dict]:
        """Prepared samples as a user has them: PNG files."""
        from PIL import Image

        rows = []
        for image in x:
            png = io.BytesIO()
            Image.fromarray(image, "L" if image.ndim == 2 else "RGB").save(png, format="PNG")
            rows.append({"image": png.getvalue()})
        return rows

    def example(self, row: dict) -> dict:
        return row


class Rows:
    """A table's rows, read from JSON rows of the user's own columns (each one the model learnt
    from; one it leaves out may come along): a number or a category per column, a missing value
    (null; in JSON rows, a key left out of one row of several) as preprocess took it (the
    training split's mean, the missing category); a column absent from every row is refused."""

    columns: tuple[str, ...] = ()  # the user's: the served model's settings say them

    def signature_columns(self, settings: dict) -> list:
        """Each column by name, of any type: `read` checks that each is there and its values, in a
        line naming the row and column (MLflow's own refusal quotes the whole request)."""
        return [ColSpec(AnyType(), column["name"], required=False) for column in settings["columns"]]

    def settings(self, prepared: Prepared[TableFacts], model) -> dict:
        """Each column's name, type and mean or categories (its keys sorted, as the description
        holds them), and the columns not learnt from."""
        kept = ("name", "type", "mean", "categories")
        columns = [
            {k: v for k, v in sorted(dataclasses.asdict(column).items()) if k in kept}
            for column in prepared.facts.columns
        ]
        return {"columns": columns, "ignored": prepared.facts.ignored}

    def artifacts(self, prepared: Prepared[TableFacts]) -> dict:
        return {}

    def read(self, frame, settings: dict, word_index: Optional[dict]) -> np.ndarray:
        if isinstance(frame, dict):
            frame = pd.DataFrame(frame)
        if not isinstance(frame, pd.DataFrame):
            raise RequestError(f"expected rows of columns, got {kind_of(frame)}")
        columns = settings["columns"]
        names = [column["name"] for column in columns]
        unknown = [str(c) for c in frame.columns if c not in names and c not in settings["ignored"]]
        if unknown:
            raise RequestError(f"unknown column {unknown[0]!r}: expected the columns {', '.join(names)}")
        absent = [name for name in names if name not in frame.columns]
        if absent:
            raise RequestError(
                f"no column {absent[0]!r}: expected the columns {', '.join(names)} (null for a missing value)"
            )
        if frame.empty:
            raise RequestError("expected at least one row")
        out = np.empty((len(frame), len(columns)), np.float32)
        for j, column in enumerate(columns):
            name = column["name"]
            values = frame[name].tolist()
            if column["type"] == "numeric":
                for i, value in enumerate(values):
                    if tabular.missing(value):
                        out[i, j] = column["mean"]
                        continue
                    found = tabular.number(value)
                    if found is None:
                        raise RequestError(
                            f"row {i}: {name}: expected a number, got {kind_of(value)} {str(value)[:40]!r}"
                        )
                    out[i, j] = found
            else:
                ids = {value: tabular.FIRST_CATEGORY + k for k, value in enumerate(column["categories"])}
                for i, value in enumerate(values):
                    missing_ = tabular.missing(value)
                    out[i, j] = tabular.MISSING if missing_ else ids.get(tabular.category(value), tabular.UNSEEN)
        return out

    def raw_rows(self, x: np.ndarray, prepared: Prepared[TableFacts]) -> list[dict]:
        """Prepared rows as a user has them: each column's number or category (the missing and
        unseen categories as null)."""
        rows = []
        for values in x:
            row: dict[str, Any] = {}
            for column, value in zip(prepared.facts.columns, values.tolist()):
                if isinstance(column, NumericColumn):
                    row[column.name] = value
                else:
                    k = int(value) - tabular.FIRST_CATEGORY
                    row[column.name] = column.categories[k] if 0 <= k < len(column.categories) else None
            rows.append(row)
        return rows

    def example(self, row: dict) -> dict:
        return row


def either(frame, columns: tuple[str, ...]) -> list[tuple[str, object]]:
    """(column, value) of each row: exactly one of the dataset's two columns per row."""
    if isinstance(frame, dict):
        frame = pd.DataFrame(frame)
    if not isinstance(frame, pd.DataFrame):
        raise RequestError(f"expected rows with a column {columns[0]!r} or {columns[1]!r}, got {kind_of(frame)}")
    present = [c for c in columns if c in frame.columns]
    if not present:
        raise RequestError(
            f"expected a column {columns[0]!r} or {columns[1]!r}, got "
            f"{', '.join(map(repr, frame.columns)) or 'no columns'}"
        )
    if frame.empty:
        raise RequestError("expected at least one row")
    rows = []
    for i in range(len(frame)):
        given = [c for c in present if not missing(frame[c].iloc[i])]
        if len(given) != 1:
            raise RequestError(
                f"row {i}: expected exactly one of {columns[0]!r} and {columns[1]!r}, got "
                f"{' and '.join(map(repr, given)) or 'neither'}"
            )
        rows.append((given[0], frame[given[0]].iloc[i]))
    return rows


def missing(value) -> bool:
    if value is None:
        return True
    try:
        return bool(np.ndim(value) == 0 and value != value)  # NaN
    except (TypeError, ValueError):
        return False


def integers(value, where: str, expected: str, ndim: int) -> np.ndarray:
    """`value` as an array of non-negative integers of `ndim` dimensions, or a RequestError."""
    try:
        array = np.asarray(value.tolist() if isinstance(value, np.ndarray) and value.dtype == object else value)
        if array.dtype == object:
            array = np.asarray([np.asarray(v) for v in array])
    except (ValueError, TypeError):
        raise RequestError(f"{where}: expected {expected}") from None
    if array.ndim != ndim or not (
        np.issubdtype(array.dtype, np.integer)
        or (np.issubdtype(array.dtype, np.floating) and np.all(array == np.round(array)))
    ):
        raise RequestError(f"{where}: expected {expected}, got {kind_of(value)}")
    array = array.astype(np.int64)
    if array.size and array.min() < 0:
        raise RequestError(f"{where}: expected {expected}, got a negative value")
    return array


def kind_of(value) -> str:
    if isinstance(value, (list, tuple, np.ndarray)):
        return f"a list of {len(value)}"
    return "nothing" if value is None else f"a {type(value).__name__}"


def of(data_or_settings) -> Any:
    """The form of a prepared folder's description, or of a served model's settings."""
    return named(data_or_settings["input"] if isinstance(data_or_settings, dict) else data_or_settings.input)


def named(form: str) -> Any:
    """What reads the served requests of the kind whose prepared samples are `form`."""
    if form not in _SERVED:
        _SERVED[form] = FORMS[form].served_form()
    return _SERVED[form]


_SERVED: dict[str, Any] = {}


def word_index_of(artifacts: dict) -> Optional[dict]:
    """The word index a served model carries, if its form has one."""
    path = artifacts.get(WORD_INDEX_ARTIFACT)
    return labelled_texts.load_word_index(Path(path)) if path else None
