"""The `file` reader of tables datasets (pipeline/data/tabular.py): CSV, Parquet and JSON Lines
alike, numbers and categories encoded from the training split, missing and unseen values
counted, what `pipeline add` makes of each column, and bad inputs through the real
`pipeline preprocess` command."""

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from support.processes import run_pipeline
from support.project import ROOT

from pipeline.config.loading.loader import load_params
from pipeline.data import prepared, tabular
from pipeline.errors import DataError
from pipeline.kinds.tables import FIRST_CATEGORY, MISSING, UNSEEN, TablePreprocessConfig

COLUMNS = ["id", "age", "colour", "joined", "label"]


def write_shop_params(folder: Path, **preprocess) -> Path:
    """A params.yaml declaring the one dataset `shop` from the shipped `add.tables` template."""
    shipped = yaml.safe_load((ROOT / "params.yaml").read_text())
    template = shipped["add"]["tables"]
    raw = {stage: {"shop": section} for stage, section in template.items()}
    raw["download"]["shop"]["files"][0]["url"] = "file:///srv/shop.csv"
    raw["tune"]["shop"]["study"] = "shop"
    raw["preprocess"]["shop"].update(categorical=["colour"], ignore=["id", "joined"], **preprocess)
    path = folder / "params.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def cfg(tmp_path_factory) -> TablePreprocessConfig:
    found = load_params(write_shop_params(tmp_path_factory.mktemp("params")), "shop").preprocess
    assert isinstance(found, TablePreprocessConfig)
    return found


def shop_rows(n: int = 100) -> list[dict]:
    """Rows whose label follows the age and the colour; every 10th age missing, every 7th
    colour missing; an id and a date on every row."""
    colours = ["red", "green", "blue", "red"]
    out = []
    for i in range(n):
        age = 20 + (i * 37) % 50
        colour = colours[i % 4]
        out.append(
            {
                "id": 1000 + i,
                "age": None if i % 10 == 3 else age,
                "colour": None if i % 7 == 5 else colour,
                "joined": f"2024-03-{i % 28 + 1:02d}",
                "label": "yes" if (age > 44) != (colour == "red") else "no",
            }
        )
    return out


def write(folder: Path, rows: list[dict], fmt: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    if fmt == "csv":
        path = folder / "shop.csv"
        with open(path, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows([{k: "" if v is None else v for k, v in row.items()} for row in rows])
    elif fmt == "jsonl":
        path = folder / "shop.jsonl"
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        path = folder / "shop.parquet"
        pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def arrays(data: prepared.Prepared) -> dict:
    return {split: data.head(split, 10**6) for split in prepared.SPLITS}


def test_csv_jsonl_and_parquet_give_the_same_records(tmp_path, cfg):
    found = {}
    for fmt in ("csv", "jsonl", "parquet"):
        write(tmp_path / fmt / "raw", shop_rows(), fmt)
        data = tabular.prepare(tmp_path / fmt / "raw", tmp_path / fmt / "out", cfg, "preprocess.shop")
        found[fmt] = arrays(data)
        assert data.input == "table_rows" and data.shape == (2,) and data.class_names == ["no", "yes"]
    for fmt in ("jsonl", "parquet"):
        for split in prepared.SPLITS:
            np.testing.assert_array_equal(found[fmt][split][0], found["csv"][split][0])
            np.testing.assert_array_equal(found[fmt][split][1], found["csv"][split][1])


def test_numbers_and_categories_are_encoded_from_the_training_split(tmp_path, cfg):
    rows = shop_rows()
    rows[0]["colour"] = "purple"  # one row: fewer than min_count (2) in any split, so unseen wherever it is
    write(tmp_path / "raw", rows, "csv")
    data = tabular.prepare(tmp_path / "raw", tmp_path / "out", cfg, "preprocess.shop")
    age, colour = data.facts.columns
    assert age.name == "age" and age.type == "numeric" and age.missing == 10
    assert colour.name == "colour" and colour.type == "categorical" and colour.missing == 14
    assert data.facts.ignored == ["id", "joined"] and data.facts.label_column == "label"
    _, y = data.head("train", 10**6)
    assert y.dtype == np.int32 and set(y.tolist()) == {0, 1}
    # ids: 0 missing, 1 unseen, then the training split's categories by falling count
    assert colour.categories[0] == "red" and colour.categories == sorted(colour.categories, key=lambda c: c != "red")
    ids = np.concatenate([arrays(data)[s][0][:, 1] for s in prepared.SPLITS])
    assert set(ids.tolist()) <= {MISSING, UNSEEN, *range(FIRST_CATEGORY, FIRST_CATEGORY + len(colour.categories))}
    assert (ids == MISSING).sum() == 14
    assert "purple" not in colour.categories and sum(colour.unseen.values()) == 1


def test_the_mean_fills_a_missing_number_and_is_the_training_splits(tmp_path, cfg):
    rows = [{"id": i, "age": float(i), "colour": "a", "joined": "2024-01-01", "label": "ab"[i % 2]} for i in range(40)]
    rows[5]["age"] = None
    write(tmp_path / "raw", rows, "jsonl")
    data = tabular.prepare(tmp_path / "raw", tmp_path / "out", cfg, "preprocess.shop")
    x, _ = data.head("train", 10**6)
    mean = data.facts.columns[0].mean
    # the training split's ages average to it, the filled one (when it is a training row) included
    assert mean == pytest.approx(float(x[:, 0].mean()), rel=1e-6)
    assert not mean == pytest.approx(np.mean([r["age"] for r in rows if r["age"] is not None]), rel=1e-6)
    assert data.facts.columns[0].missing == 1


def test_max_categories_keeps_the_most_frequent_of_those_seen_min_count_times(tmp_path, cfg):
    import dataclasses

    rows = [
        {"id": i, "age": i, "colour": "common" if i % 2 else f"rare{i}", "joined": "2024-01-01", "label": "ab"[i % 2]}
        for i in range(60)
    ]
    write(tmp_path / "raw", rows, "csv")
    data = tabular.prepare(tmp_path / "raw", tmp_path / "out", dataclasses.replace(cfg, max_categories=1), "w")
    colour = data.facts.columns[1]
    assert colour.categories == ["common"] and colour.seen > 1
    x, _ = data.head("train", 10**6)
    assert set(x[:, 1].tolist()) == {UNSEEN, FIRST_CATEGORY}


# --------------------------------------------------------------------------- what `pipeline add` reads


def test_the_survey_says_what_each_column_is(tmp_path, cfg):
    rows = shop_rows()
    for i, row in enumerate(rows):
        row["name"] = f"customer {i}"  # a text different on every row: a name
        row["size"] = "SML"[i % 3]
    write(tmp_path / "raw", rows, "csv")
    choices = {c.key: c for c in tabular.survey(tmp_path / "raw", cfg)}
    assert choices["preprocess.categorical"].value == ["colour", "size"]
    assert choices["preprocess.ignore"].value == ["id", "joined", "name"]
    why = choices["preprocess.ignore"].why
    assert "id: a different integer on 100 of 100 rows" in why and "joined: a date on every row" in why
    assert "name: 100 different values in 100 rows" in why
    assert choices["preprocess.categorical"].why.endswith("numbers: age")
    assert choices["train.class_weight"].value is None  # the template's stands


def test_a_tables_classes_spread_is_reported_however_far_apart(tmp_path, cfg):
    rows = shop_rows()
    for i, row in enumerate(rows):
        row["label"] = "rare" if i % 25 == 0 else "common"  # 4 rows against 96: 24x
    write(tmp_path / "raw", rows, "csv")
    choice = next(c for c in tabular.survey(tmp_path / "raw", cfg) if c.key == "train.class_weight")
    assert (choice.value, choice.why) == (
        None,
        "the classes have 4 to 96 rows (24.0x); balanced weighs each class by its size, for the small classes",
    )


def test_the_survey_names_eight_columns_of_numbers_and_counts_the_rest(tmp_path, cfg):
    rows = [{**{f"x{i}": (i * j) % 7 for i in range(11)}, "label": "ab"[j % 2]} for j in range(30)]
    write(tmp_path / "raw", rows, "csv")
    (categorical, _, _) = tabular.survey(tmp_path / "raw", cfg)
    assert categorical.why == "no column of categories; numbers: x0, x1, x2, x3, x4, x5, x6, x7 and 3 more"


def test_the_survey_refuses_a_table_without_the_label_column(tmp_path, cfg):
    write(tmp_path / "raw", [{"a": 1, "b": 2}, {"a": 3, "b": 4}], "csv")
    with pytest.raises(DataError, match=r"no column 'label' \(the label column"):
        tabular.survey(tmp_path / "raw", cfg)


# --------------------------------------------------------------------------- through the CLI

BAD_INPUTS: dict[str, tuple[str, str, str]] = {
    "a column missing": (
        '{"id": 1, "age": 3, "colour": "a", "joined": "x", "label": "a"}\n'
        '{"id": 2, "colour": "b", "joined": "x", "label": "b"}\n',
        "jsonl",
        ":2: no column 'age'",
    ),
    "a value of the wrong type": (
        "id,age,colour,joined,label\n1,3,a,x,a\n2,old,b,x,b\n",
        "csv",
        ':3: age: expected a number, got "old"',
    ),
    "a label missing": (
        "id,age,colour,joined,label\n1,3,a,x,a\n2,4,b,x,\n",
        "csv",
        ':3: label: expected a label (text or integer), got ""',
    ),
    "a column the params name missing": (
        "id,age,joined,label\n1,3,x,a\n2,4,x,b\n",
        "csv",
        ": no column 'colour' (preprocess.shop.categorical;",
    ),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_tables_fail_with_one_error_line_and_no_output(tmp_path, case):
    content, fmt, says = BAD_INPUTS[case]
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / f"shop.{fmt}").write_text(content)
    params = write_shop_params(tmp_path)
    out = tmp_path / "prepared"
    done = run_pipeline("preprocess", "shop", "--raw", raw, "--out", out, "--params", params, cwd=tmp_path)
    lines = done.stderr.splitlines()
    assert done.returncode == 1, done.stderr
    assert len(lines) == 1 and lines[0].startswith(f"error: {raw / f'shop.{fmt}'}{says}"), done.stderr
    assert not out.exists()


def test_a_file_that_is_not_parquet_is_one_line(tmp_path, cfg):
    (tmp_path / "raw").mkdir()
    (tmp_path / "raw" / "shop.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(DataError, match=r"shop.parquet: not a Parquet file"):
        tabular.prepare(tmp_path / "raw", tmp_path / "out", cfg, "preprocess.shop")
    assert not (tmp_path / "out").exists()
