"""A table of columns -> float32 records: the reader `file` of kind `tables` (one CSV, Parquet or
JSON Lines file, a row per sample), and what `pipeline add` reads from such a table.

Every column but the label and `ignore`'s is a feature: a categorical one (`categorical`) holds
categories, any other one numbers. A record holds each feature in the file's column order: a
number as it is (a missing one, an empty CSV field or a JSON null, as the training split's
mean of the column), a category as its id (`pipeline.kinds.tables`: 0 missing, 1 a value the
training split lacks, holds fewer than `min_count` times or past `max_categories`, then the
training split's values by falling count). The model normalises the numbers and encodes the categories itself
(Keras' FeatureSpace, pipeline/training/models.py), from the training split.

The classes are the label column's values, sorted as the texts' are; the rows are split as the
texts' are (`texts.split_places`). Three passes over the file, none holding its rows: the
labels (so the classes and the split), the training split's columns (means and categories),
then each row written to its split. Every row is a sample: a missing column, a number that is
not one, a missing label are errors naming the file, line and column. The description counts
each column's missing values and, by split, its unseen categories.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Union

import numpy as np

from pipeline.data import prepared
from pipeline.data import survey as survey_
from pipeline.data.texts import class_order, find_table, label_of, records, split_places
from pipeline.errors import DataError
from pipeline.kinds import tables
from pipeline.kinds.tables import FIRST_CATEGORY, MISSING, UNSEEN, CategoricalColumn, NumericColumn, TableFacts

if TYPE_CHECKING:
    from pipeline.data.prepared import Prepared
    from pipeline.kinds.tables import TablePreprocessConfig

SUFFIXES = {".csv": "csv", ".parquet": "parquet", ".jsonl": "jsonl", ".ndjson": "jsonl"}
WHAT = ".csv, .parquet or .jsonl file of a table"
PARQUET_BATCH = 4096  # rows read at once from a Parquet file


def rows(path: Path) -> Iterator[tuple[int, dict]]:
    """(line, row) of every row of the table, streamed: a CSV's values as text, a JSON Lines
    file's and a Parquet file's as their types; a Parquet row's "line" is its number from 1."""
    if SUFFIXES[path.suffix.lower()] != "parquet":
        yield from records(path, SUFFIXES)
        return
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        source = pq.ParquetFile(path)
        number = 0
        for batch in source.iter_batches(batch_size=PARQUET_BATCH):
            for row in batch.to_pylist():
                number += 1
                yield number, row
    except (pa.ArrowException, OSError) as exc:
        raise DataError(f"{path}: not a Parquet file ({str(exc).splitlines()[0][:120]})") from None


def missing(value: Any) -> bool:
    """An empty CSV field, a JSON null, a Parquet null or a NaN."""
    if value is None:
        return True
    if isinstance(value, float):
        return math.isnan(value)
    return isinstance(value, str) and not value.strip()


def number(value: Any) -> Optional[float]:
    """`value` as a number (a CSV's text of one, a JSON or Parquet number), or None when it is none."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            found = float(value.strip())
        except ValueError:
            return None
        return found if math.isfinite(found) else None
    return None


def category(value: Any) -> str:
    """A category's name: the text of the value (a JSON or Parquet number as its text)."""
    return value.strip() if isinstance(value, str) else json.dumps(value) if isinstance(value, bool) else str(value)


def labelled(path: Path, line: int, column: str, value: Any) -> str:
    """A row's label (`label_of`), or an error naming the file, line and column."""
    found = label_of(value)
    if found is None:
        raise DataError(f"{path}:{line}: {column}: expected a label (text or integer), got {json.dumps(value)[:40]}")
    return found


class Columns:
    """The table's columns as the params read them: the features in the file's order (each
    numeric or categorical), the label, and what the params leave out."""

    def __init__(self, path: Path, header: list[str], cfg: TablePreprocessConfig, where: str):
        for key, names in (
            ("label_column", [cfg.label_column]),
            ("categorical", cfg.categorical),
            ("ignore", cfg.ignore),
        ):
            for name in names:
                if name not in header:
                    raise DataError(
                        f"{path}: no column {name!r} ({where}.{key}; its columns: {', '.join(map(str, header))})"
                    )
        left_out = {cfg.label_column, *cfg.ignore}
        self.features = [c for c in header if c not in left_out]
        if not self.features:
            raise DataError(f"{path}: no column to learn from besides the label and {where}.ignore's")
        self.categorical = set(cfg.categorical)
        self.label = cfg.label_column

    def numbers(self, path: Path, line: int, row: dict) -> list[Optional[float]]:
        """Each numeric feature of a row as a number, None where it is missing."""
        out: list[Optional[float]] = []
        for name in self.features:
            if name in self.categorical:
                continue
            if name not in row:
                raise DataError(f"{path}:{line}: no column {name!r}")
            value = row[name]
            if missing(value):
                out.append(None)
                continue
            found = number(value)
            if found is None:
                raise DataError(
                    f"{path}:{line}: {name}: expected a number, got {json.dumps(value)[:40]} (a column of categories "
                    "goes in preprocess.<ds>.categorical, one to leave out in preprocess.<ds>.ignore)"
                )
            out.append(found)
        return out

    def categories(self, path: Path, line: int, row: dict) -> list[Optional[str]]:
        """Each categorical feature of a row as a category, None where it is missing."""
        out: list[Optional[str]] = []
        for name in self.features:
            if name not in self.categorical:
                continue
            if name not in row:
                raise DataError(f"{path}:{line}: no column {name!r}")
            out.append(None if missing(row[name]) else category(row[name]))
        return out

    def label_of(self, path: Path, line: int, row: dict) -> str:
        if self.label not in row:
            raise DataError(f"{path}:{line}: no column {self.label!r}")
        return labelled(path, line, self.label, row[self.label])


def _header(path: Path) -> list[str]:
    """The table's columns: a CSV's header line, a Parquet file's schema, the keys of a JSON Lines
    file's first row."""
    if SUFFIXES[path.suffix.lower()] == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            return list(pq.read_schema(path).names)
        except (pa.ArrowException, OSError) as exc:
            raise DataError(f"{path}: not a Parquet file ({str(exc).splitlines()[0][:120]})") from None
    for _, row in rows(path):
        return [str(c) for c in row]
    raise DataError(f"{path}: no rows: expected a header line and a row per sample")


def _labels(path: Path, columns: Columns) -> list[str]:
    found = [columns.label_of(path, line, row) for line, row in rows(path)]
    if not found:
        raise DataError(f"{path}: no rows: expected a header line and a row per sample")
    return found


class _Statistics:
    """The training split's numbers (their sums, for the means) and categories (their counts),
    summed as its rows stream by."""

    def __init__(self, numeric: int, categorical: int):
        self.sums, self.present = np.zeros(numeric), np.zeros(numeric, np.int64)
        self.counts: list[Counter[str]] = [Counter() for _ in range(categorical)]

    def add(self, numbers: list[Optional[float]], categories: list[Optional[str]]) -> None:
        for i, value in enumerate(numbers):
            if value is not None:
                self.sums[i] += value
                self.present[i] += 1
        for i, found in enumerate(categories):
            if found is not None:
                self.counts[i][found] += 1

    def means(self) -> list[float]:
        return [float(s / n) if n else 0.0 for s, n in zip(self.sums, self.present)]

    def categories(self, most: int, least: int) -> list[list[str]]:
        """Each column's kept categories: those seen `least` times or more, at most the `most`
        most frequent, ties by name."""
        return [sorted((v for v in c if c[v] >= least), key=lambda v: (-c[v], v))[:most] for c in self.counts]


class _Encoder:
    """A row's features -> its record, as the training split's statistics say (the module's
    docstring); the missing values and unseen categories counted as the rows go by."""

    def __init__(self, columns: Columns, statistics: _Statistics, max_categories: int, min_count: int):
        self.features = columns.features
        self.numeric = [c for c in columns.features if c not in columns.categorical]
        self.categorical = [c for c in columns.features if c in columns.categorical]
        self.means, self.kept = statistics.means(), statistics.categories(max_categories, min_count)
        self.seen = [len(counts) for counts in statistics.counts]
        self.ids = [{value: FIRST_CATEGORY + i for i, value in enumerate(values)} for values in self.kept]
        self.missing: Counter[str] = Counter()
        self.unseen: dict[str, Counter[str]] = {name: Counter() for name in prepared.SPLITS}

    def encode(self, split: str, numbers: list[Optional[float]], categories: list[Optional[str]]) -> np.ndarray:
        values = np.empty(len(self.features), np.float32)
        next_number, next_category = iter(enumerate(numbers)), iter(enumerate(categories))
        for i, name in enumerate(self.features):
            if name in self.categorical:
                j, category_ = next(next_category)
                values[i] = MISSING if category_ is None else self.ids[j].get(category_, UNSEEN)
                self.unseen[split][name] += category_ is not None and values[i] == UNSEEN
                self.missing[name] += category_ is None
            else:
                j, number_ = next(next_number)
                values[i] = self.means[j] if number_ is None else number_
                self.missing[name] += number_ is None
        return values

    def described(self) -> list[Union[NumericColumn, CategoricalColumn]]:
        """Each feature column as the description holds it: its mean or categories, and counts."""
        out: list[Union[NumericColumn, CategoricalColumn]] = []
        for name in self.features:
            missing_ = int(self.missing[name])
            if name in self.categorical:
                j = self.categorical.index(name)
                unseen = {split: int(self.unseen[split][name]) for split in prepared.SPLITS}
                out.append(CategoricalColumn(name, self.kept[j], self.seen[j], unseen, missing_))
            else:
                out.append(NumericColumn(name, self.means[self.numeric.index(name)], missing_))
        return out


def prepare(raw_dir: Path | str, out: Path | str, cfg: TablePreprocessConfig, where: str) -> Prepared:
    """The download folder -> the prepared folder `out`, streamed (three passes, none holding
    the rows; the module's docstring)."""
    path = find_table(raw_dir, SUFFIXES, WHAT)
    columns = Columns(path, _header(path), cfg, where)
    labels = _labels(path, columns)
    classes = class_order(set(labels))
    if len(classes) < 2:
        raise DataError(f"{path}: {cfg.label_column}: one label ({classes[0]!r}); expected two or more")
    position = {c: i for i, c in enumerate(classes)}
    places = split_places(len(labels), cfg, np.array([position[label] for label in labels]) if cfg.stratify else None)
    statistics = _Statistics(len(columns.features) - len(columns.categorical), len(columns.categorical))
    for row_number, (line, row) in enumerate(rows(path)):
        if places[row_number][0] == "train":
            statistics.add(columns.numbers(path, line, row), columns.categories(path, line, row))
    encoder = _Encoder(columns, statistics, cfg.max_categories, cfg.min_count)
    with prepared.Writer(out) as writer:
        sizes = Counter(split for split, _ in places)
        splits = {
            name: writer.split(name, sizes[name], (len(columns.features),), tables.FORM, len(classes))
            for name in prepared.SPLITS
        }
        for row_number, (line, row) in enumerate(rows(path)):
            split, place = places[row_number]
            values = encoder.encode(split, columns.numbers(path, line, row), columns.categories(path, line, row))
            splits[split].add(place, position[columns.label_of(path, line, row)], values)
        return writer.finish(
            {name: split.close() for name, split in splits.items()},
            input_=tables.FORM,
            shape=(len(columns.features),),
            class_names=classes,
            facts=TableFacts(encoder.described(), cfg.label_column, list(cfg.ignore)),
        )


# --------------------------------------------------------------------------- what `pipeline add` reads

# a column whose values are all different on this share of the rows or more identifies a row
IDENTIFIES = 0.9
# distinct values counted per column at most (beyond it, the column's count is "more than this")
DISTINCT_HELD = 100_000
DATE = re.compile(r"\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?")


class _Column:
    """What one pass finds in a column: numbers or not, integers or not, dates, distinct values."""

    def __init__(self):
        self.present = self.numbers = self.integers = self.dates = 0
        self.values: set[str] = set()
        self.overflow = False

    def add(self, value: Any) -> None:
        if missing(value):
            return
        self.present += 1
        found = number(value)
        if found is not None:
            self.numbers += 1
            self.integers += found == int(found)
        elif isinstance(value, str) and DATE.fullmatch(value.strip()):
            self.dates += 1
        if not self.overflow:
            self.values.add(category(value))
            self.overflow = len(self.values) > DISTINCT_HELD

    def distinct(self) -> str:
        return f"more than {DISTINCT_HELD:,}" if self.overflow else f"{len(self.values):,}"


# columns a line names at most
NAMED = 8


def _some(names: list[str]) -> str:
    """The first NAMED names, and how many more."""
    shown = ", ".join(names[:NAMED])
    return shown if len(names) <= NAMED else f"{shown} and {len(names) - NAMED} more"


def survey(raw_dir: Path | str, cfg: TablePreprocessConfig) -> list[survey_.Choice]:
    """The settings `pipeline add` chooses for a table, from one pass over its rows: what each
    column is (numbers, categories, or what identifies a row: an integer or a text different on
    nearly every row, a date); and the classes' spread, reported beside the template's class_weight."""
    path = find_table(raw_dir, SUFFIXES, WHAT)
    header = _header(path)
    if cfg.label_column not in header:
        raise DataError(
            f"{path}: no column {cfg.label_column!r} (the label column: -S preprocess.<ds>.label_column=...; its "
            f"columns: {', '.join(map(str, header))})"
        )
    found = {name: _Column() for name in header if name != cfg.label_column}
    labels: Counter[str] = Counter()
    count = 0
    for line, row in rows(path):
        label = labelled(path, line, cfg.label_column, row.get(cfg.label_column))
        labels[label] += 1
        count += 1
        for name, column in found.items():
            if name not in row:
                raise DataError(f"{path}:{line}: no column {name!r}")
            column.add(row[name])
    if len(labels) < 2:
        raise DataError(f"{path}: {cfg.label_column}: one label ({next(iter(labels))!r}); expected two or more")
    categorical, ignored, numeric, why_ignored, why_categorical = [], [], [], [], []
    for name, column in found.items():
        unique = column.overflow or len(column.values) >= IDENTIFIES * max(column.present, 1)
        if column.present and column.numbers == column.present:
            if unique and column.integers == column.present and column.present > 20:
                ignored.append(name)
                why_ignored.append(f"{name}: a different integer on {column.distinct()} of {count:,} rows")
            else:
                numeric.append(name)
        elif column.present and column.dates == column.present:
            ignored.append(name)
            why_ignored.append(f"{name}: a date on every row")
        elif unique and column.present > 20:
            ignored.append(name)
            why_ignored.append(f"{name}: {column.distinct()} different values in {count:,} rows")
        else:
            categorical.append(name)
            why_categorical.append(f"{name}: {column.distinct()} values")
    numbers = f"; numbers: {_some(numeric)}" if numeric else "; no column of numbers"
    return [
        survey_.Choice(
            "preprocess.categorical",
            categorical,
            ("categories: " + ", ".join(why_categorical) if categorical else "no column of categories") + numbers,
        ),
        survey_.Choice(
            "preprocess.ignore",
            ignored,
            "what identifies a row: " + "; ".join(why_ignored) if ignored else "no column identifies a row",
        ),
        survey_.class_weight(labels, "rows"),
    ]
