import os
import stat

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


def test_a_killed_writers_leftovers_are_cleared_by_the_next_write(tmp_path):
    from pipeline.io import atomic_dir

    (tmp_path / ".a.json.x1y2.tmp").write_text("{")  # what SIGKILL mid-write leaves
    (tmp_path / ".model.k3.tmp").mkdir()
    (tmp_path / ".other.json.z.tmp").write_text("not ours")
    write_json(tmp_path / "a.json", {"b": 1})
    with atomic_dir(tmp_path / "model") as tmp:
        (tmp / "m").write_text("m")
    assert sorted(p.name for p in tmp_path.iterdir()) == [".other.json.z.tmp", "a.json", "model"]


def test_outputs_appear_together_or_not_at_all(tmp_path):
    from pipeline.io import atomic_outputs

    with pytest.raises(RuntimeError):
        with atomic_outputs(tmp_path / "m.json", tmp_path / "model", folders=[tmp_path / "model"]) as (m, model):
            write_json(m, {"a": 1})
            (model / "w").write_text("w")
            raise RuntimeError("the third output failed")
    assert list(tmp_path.iterdir()) == []
    with atomic_outputs(tmp_path / "m.json", tmp_path / "model", folders=[tmp_path / "model"]) as (m, model):
        write_json(m, {"a": 1})
        (model / "w").write_text("w")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json", "model"]


def test_a_place_that_cannot_take_the_output_is_an_output_error(tmp_path):
    import errno

    from pipeline.errors import OutputError

    with pytest.raises(OutputError, match=r"a.json: cannot write: No space left on device"):
        with atomic_file(tmp_path / "a.json"):
            raise OSError(errno.ENOSPC, "No space left on device")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(OSError) as caught:  # other OS errors are not about the place
        with atomic_file(tmp_path / "a.json"):
            raise OSError(errno.EIO, "Input/output error")
    assert not isinstance(caught.value, OutputError)


@pytest.mark.parametrize("payload", [b"", b"{", b"\xff\xfe", b'{"a": 1}garbage'])
def test_broken_json_is_one_line_naming_the_file(tmp_path, payload):
    (tmp_path / "stats.json").write_bytes(payload)
    with pytest.raises(DataError) as caught:
        read_json(tmp_path / "stats.json")
    assert str(caught.value).startswith(f"{tmp_path / 'stats.json'}: not readable JSON: ")
    assert "\n" not in str(caught.value)


def test_csv_has_unix_line_ends_and_floats_in_full_unless_told(tmp_path):
    from pipeline.io import write_csv

    write_csv(tmp_path / "a.csv", [{"k": 1, "v": 1 / 3}], ["k", "v"])
    assert (tmp_path / "a.csv").read_bytes() == b"k,v\n1,0.3333333333333333\n"
    write_csv(tmp_path / "b.csv", [{"k": 1, "v": 1 / 3}], ["k", "v"], digits=6)
    assert (tmp_path / "b.csv").read_bytes() == b"k,v\n1,0.333333\n"


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077])
def test_outputs_get_the_mode_a_plain_open_or_mkdir_gives_under_the_umask(tmp_path, umask):
    """mkstemp and mkdtemp make 0600 files and 0700 folders whatever the umask: renamed into
    place as they are, no teammate or other uid could read an output."""
    plain_file, plain_dir = tmp_path / "plain.txt", tmp_path / "plain"
    old = os.umask(umask)
    try:
        plain_file.write_text("x")
        plain_dir.mkdir()
        write_json(tmp_path / "a.json", {"b": 1})
        with atomic_dir(tmp_path / "model") as tmp:
            write_json(tmp / "inner.json", {})
        with atomic_file(tmp_path / "run.sh") as tmp:
            tmp.write_text("#!/bin/sh\n")
            tmp.chmod(0o700)
    finally:
        os.umask(old)
    mode = lambda p: stat.S_IMODE(p.stat().st_mode)  # noqa: E731
    assert mode(tmp_path / "a.json") == mode(plain_file) == 0o666 & ~umask
    assert mode(tmp_path / "model" / "inner.json") == 0o666 & ~umask
    assert mode(tmp_path / "model") == mode(plain_dir) == 0o777 & ~umask
    assert mode(tmp_path / "run.sh") == 0o777 & ~umask  # an executable stays executable


def test_a_temporary_of_a_temporary_left_by_a_killed_writer_is_cleared_too(tmp_path):
    """write_csv inside atomic_outputs writes the outer temporary through atomic_file: killed
    then, it leaves `..<name>.<random>.tmp.<random>.tmp` beside the output."""
    (tmp_path / "..per_class.csv.abc123.tmp.def456.tmp").write_text("half")
    (tmp_path / ".per_class.csv.abc123.tmp").write_text("half")
    write_json(tmp_path / "per_class.csv", {})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["per_class.csv"]


def test_a_library_warning_while_reading_never_reaches_the_terminal(capsys, caplog):
    import logging
    import warnings

    from pipeline.io import reading

    with warnings.catch_warnings(record=True) as escaped:
        warnings.simplefilter("always")
        with pytest.raises(DataError) as caught, reading("pic.png", "unreadable image"):
            warnings.warn("Image size exceeds limit", UserWarning, stacklevel=1)
            raise ValueError("broken")
        with caplog.at_level(logging.DEBUG, logger="pipeline"), reading("ok.npz"):
            warnings.warn("a harmless one", RuntimeWarning, stacklevel=1)
    assert str(caught.value) == "pic.png: unreadable image: broken"
    assert escaped == [] and capsys.readouterr().err == ""
    assert caplog.messages == ["ok.npz: RuntimeWarning: a harmless one (passed over)"]


def test_a_lock_held_elsewhere_makes_a_second_holder_wait_then_refuse_naming_it(tmp_path):
    from pipeline import io as pipeline_io
    from pipeline.errors import PipelineError

    lock = tmp_path / "state" / ".params.yaml.lock"  # its folder made when missing
    with pipeline_io.locked(lock):
        with pytest.raises(PipelineError, match=r"\.params\.yaml\.lock: held by the test for 0\.2 s; try again"):
            with pipeline_io.locked(lock, 0.2, held_by="the test"):
                pass
    with pipeline_io.locked(lock, 0.2):  # let go when the block ended
        pass
