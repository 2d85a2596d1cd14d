"""Kind `tables`: a table of columns, a row per sample, as users export from a database or a
spreadsheet (a CSV, Parquet or JSON Lines file): a label column, numeric columns and
categorical ones, prepared as float32 records (a number as it is, a missing one as the training
split's mean; a category as its id in the training split's values, 0 missing, 1 unseen). Its
reader is `file` (pipeline/data/tabular.py); its facts (`TableFacts`) each feature column's
(`NumericColumn`, `CategoricalColumn`), the label column and those ignored; its models the table
`tables`, whose model encodes the columns with Keras' FeatureSpace; its template `add.tables`;
its served requests JSON rows of the user's own columns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Union

from pipeline.fields import fraction, non_negative_int, positive_int, spec
from pipeline.kinds.kind import Kind, Reader, kind_key, reader_key, stratify, validation_split

NAME = "tables"
FORM = "table_rows"
# a category's id: 0 a missing value, 1 a value the training split does not hold (or one it holds
# fewer than min_count times, or past max_categories), then the training split's values by falling count
MISSING, UNSEEN, FIRST_CATEGORY = 0, 1, 2


def _names(help: str):
    return spec(
        "a list of column names",
        lambda v: len(set(v)) == len(v) and all(v),
        help=help,
    )


@dataclass(frozen=True)
class TablePreprocessConfig:
    kind: str = kind_key()
    reader: Literal["file"] = reader_key(
        "file: one CSV (with a header line), Parquet or JSON Lines file of a row per sample: the label column "
        "and the feature columns."
    )
    label_column: str = spec(
        "a column name",
        lambda v: bool(v),
        help="The column holding each sample's label (text or integer); the classes are its values, sorted.",
    )
    categorical: tuple[str, ...] = _names(
        "The columns read as categories: each value its own category, looked up among the training split's "
        "values (a missing value and an unseen one each have their own). Every other column but the label and "
        "`ignore`'s is a number."
    )
    ignore: tuple[str, ...] = _names(
        "The columns not learnt from: what identifies a row rather than describes it (an id, a name, a date on "
        "every row). `pipeline add` lists those it finds."
    )
    max_categories: int = positive_int(
        help="A categorical column's categories at most: its most frequent values in the training split; a "
        "rarer value counts as an unseen one."
    )
    min_count: int = positive_int(
        help="A value is a category of its own when the training split holds it this many times or more; a "
        "rarer one counts as an unseen one, so that the model learns what an unseen value is from the training "
        "rows (2: a value seen once teaches nothing the test split can use)."
    )
    test_split: float = fraction(help="The share of the rows held out for testing.", low_open=True)
    split_seed: int = non_negative_int(help="Shuffle seed of the train/test split.")
    validation_split: float = validation_split()
    validation_seed: int = non_negative_int(help="Seed of the validation hold-out.")
    stratify: bool = stratify(
        "the test share, then the validation share of the rest, are held out",
        "split_seed and validation_seed",
        "every split (from 3 samples on, with a test_split below 0.5)",
    )


@dataclass(frozen=True)
class NumericColumn:
    """A column of numbers, as the description of a prepared table holds it: its mean in the
    training split (what a missing number is), and its missing values in the table."""

    name: str
    mean: float
    missing: int
    type: Literal["numeric"] = "numeric"


@dataclass(frozen=True)
class CategoricalColumn:
    """A column of categories, as the description of a prepared table holds it: its categories
    (each one's id FIRST_CATEGORY + its place), the distinct values the training split holds, the
    values of each split no category is (counted as unseen), and its missing values in the table."""

    name: str
    categories: list[str]
    seen: int
    unseen: dict[str, int]
    missing: int
    type: Literal["categorical"] = "categorical"


@dataclass(frozen=True)
class TableFacts:
    """What the description of a prepared table holds of it besides the common keys: each feature
    column in the records' order, the label column, and the columns not learnt from."""

    columns: list[Union[NumericColumn, CategoricalColumn]]
    label_column: str
    ignored: list[str]


# selftest's synthetic tables: this many numeric columns besides the section's categorical ones
SAMPLE_NUMBERS = 4


def samples(cfg: Any, n: int, rng: Any) -> tuple[Any, TableFacts, dict]:
    """`n` rows of SAMPLE_NUMBERS numbers (standard normal) and the section's categorical columns
    (ids of five categories), their facts, no assets."""
    import numpy as np  # NumPy: only once selftest runs

    numbers = rng.standard_normal((n, SAMPLE_NUMBERS))
    categories = rng.randint(FIRST_CATEGORY, FIRST_CATEGORY + 5, (n, len(cfg.categorical)))
    columns: list[Union[NumericColumn, CategoricalColumn]] = [
        NumericColumn(f"x{i}", mean=0.0, missing=0) for i in range(SAMPLE_NUMBERS)
    ]
    columns += [
        CategoricalColumn(name, [f"c{j}" for j in range(5)], seen=5, unseen={"train": 0}, missing=0)
        for name in cfg.categorical
    ]
    facts = TableFacts(columns, cfg.label_column, list(cfg.ignore))
    return np.concatenate([numbers, categories], axis=1).astype("float32"), facts, {}


KIND = Kind(
    name=NAME,
    help="a CSV, Parquet or JSON Lines file of a label column and numeric and categorical columns",
    form=FORM,
    dtype="float32",
    pictures=False,
    readers={"file": Reader("pipeline.data.tabular", TablePreprocessConfig)},
    models="tabular",
    templates=(NAME,),
    served="pipeline.serving.forms:Rows",
    facts=TableFacts,
    samples=samples,
)
