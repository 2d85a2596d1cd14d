import pytest

from pipeline.errors import DataError
from pipeline.io import atomic_dir, atomic_file, read_json, write_json


def test_atomic_dir_replaces_the_output_only_on_success(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "old.txt").write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_dir(out) as tmp:
            (tmp / "half.txt").write_text("half")
            raise RuntimeError("interrupted")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert sorted(p.name for p in out.iterdir()) == ["old.txt"]
    with atomic_dir(out) as tmp:
        (tmp / "new.txt").write_text("new")
    assert sorted(p.name for p in out.iterdir()) == ["new.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_atomic_file_leaves_nothing_on_failure(tmp_path):
    with pytest.raises(ValueError):
        with atomic_file(tmp_path / "a.json") as tmp:
            tmp.write_text("{")
            raise ValueError
    assert list(tmp_path.iterdir()) == []
    write_json(tmp_path / "a.json", {"b": 1})
    assert read_json(tmp_path / "a.json") == {"b": 1}


def test_read_json_errors_name_the_file(tmp_path):
    with pytest.raises(DataError, match="stats.json: missing"):
        read_json(tmp_path / "stats.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(DataError, match="bad.json: not readable JSON"):
        read_json(tmp_path / "bad.json")
