"""pipeline/kinds/tables.py: its preprocess section and selftest's samples."""

import dataclasses

import numpy as np

from pipeline.kinds import tables


def test_every_column_but_the_label_and_ignore_is_a_feature_the_section_says_which_are_categories():
    fields = {f.name: f for f in dataclasses.fields(tables.TablePreprocessConfig)}
    assert {"label_column", "categorical", "ignore", "max_categories"} <= set(fields)
    check = fields["categorical"].metadata["check"]
    assert check(("a", "b")) and not check(("a", "a")) and not check(("",))


def test_the_samples_have_the_sections_categories_after_the_numbers():
    class Section:
        categorical, label_column, ignore = ("plan", "region"), "churned", ("id",)

    x, facts, assets = tables.samples(Section(), 6, np.random.RandomState(0))
    assert assets == {}
    assert x.shape == (6, tables.SAMPLE_NUMBERS + 2) and x.dtype == np.float32
    kinds = [c.type for c in facts.columns]
    assert kinds == ["numeric"] * tables.SAMPLE_NUMBERS + ["categorical"] * 2
    assert [c.name for c in facts.columns[tables.SAMPLE_NUMBERS :]] == ["plan", "region"]
    assert (facts.label_column, facts.ignored) == ("churned", ["id"])
    ids = x[:, tables.SAMPLE_NUMBERS :]
    assert ids.min() >= tables.FIRST_CATEGORY and np.all(ids == np.round(ids))
    assert tables.KIND.dtype == "float32" and not tables.KIND.pictures and tables.KIND.templates == ("tables",)
