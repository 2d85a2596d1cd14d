"""`pipeline preprocess` (stages/preprocess.py) as DVC runs it: one result line whose counts are
the prepared folder's, every sample of the raw files in one split; an input that is not there,
one error line and nothing written. Each kind's reader is tested
in tests/data/ (test_reuters, test_mnist, test_images, test_texts, test_tabular)."""

from __future__ import annotations

import pytest
from support.datasets import make_mnist_archive, make_reuters_raw
from support.processes import run_pipeline
from support.project import write_params

from pipeline.data import prepared


@pytest.mark.parametrize(
    ("dataset", "make", "samples"),
    [
        pytest.param("reuters", lambda raw: make_reuters_raw(raw, n=120), 120, id="reuters"),
        pytest.param("mnist", lambda raw: make_mnist_archive(raw / "mnist_png.tar.gz"), None, id="mnist"),
    ],
)
def test_the_result_line_counts_each_split_of_what_it_wrote(tmp_path, dataset, make, samples):
    raw = tmp_path / "raw"
    raw.mkdir()
    make(raw)
    write_params(tmp_path)
    done = run_pipeline("preprocess", dataset, "--raw", "raw", "--out", "prepared", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    found = prepared.read(tmp_path / "prepared")
    counts = {name: split.samples for name, split in found.splits.items()}
    (line,) = done.stdout.splitlines()
    name, printed = line.split(": ", 1)
    assert name == dataset and [part.split() for part in printed.split(", ")] == [
        [split, str(counts[split])] for split in ("train", "val", "test")
    ]
    assert set(counts) == {"train", "val", "test"} and min(counts.values()) > 0
    if samples is not None:
        assert sum(counts.values()) == samples  # no newswire dropped


def test_missing_input_is_one_line(tmp_path):
    from support.project import write_params

    write_params(tmp_path)
    result = run_pipeline("preprocess", "reuters", "--raw", "nowhere", "--out", "out", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "error: nowhere/reuters_word_index.json: missing; run the download stage first"
    ]
    assert not (tmp_path / "out").exists()
