"""pipeline.data.archives: every file of a zip or tar archive, member by member, in archive
order; links read through to their file; anything else one DataError naming the member."""

import io
import tarfile
import zipfile
from pathlib import Path

import pytest
from fixtures import write_archive

from pipeline.data import archives
from pipeline.errors import DataError


def read(path):
    return [(name, handle.read()) for name, handle in archives.members(path)]


@pytest.mark.parametrize("name", ["digits.zip", "digits.tar.gz"])
def test_every_file_in_archive_order_and_no_folder(tmp_path, name):
    path = tmp_path / name
    write_archive(path, {"b/2.png": b"two", "a/1.png": b"one", "c.txt": b""})
    assert read(path) == [("b/2.png", b"two"), ("a/1.png", b"one"), ("c.txt", b"")]
    with zipfile.ZipFile(tmp_path / "folders.zip", "w") as zf:
        zf.writestr("d/", b"")
        zf.writestr("d/3.png", b"three")
    assert read(tmp_path / "folders.zip") == [("d/3.png", b"three")]


def tar_with(path, *members):
    with tarfile.open(path, "w") as tf:
        for info, data in members:
            tf.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def entry(name, kind=tarfile.REGTYPE, data=None, link=""):
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.size = kind, link, len(data or b"")
    return info, data


def test_hard_and_symbolic_links_are_read_through_to_their_file(tmp_path):
    path = tar_with(
        tmp_path / "links.tar",
        entry("a.png", data=b"pixels"),
        entry("same.png", tarfile.LNKTYPE, link="a.png"),
        entry("alias.png", tarfile.SYMTYPE, link="a.png"),
    )
    assert read(path) == [("a.png", b"pixels"), ("same.png", b"pixels"), ("alias.png", b"pixels")]


@pytest.mark.parametrize(
    "member,message",
    [
        (entry("pipe", tarfile.FIFOTYPE), "pipe: not a file but a FIFO"),
        (entry("tty", tarfile.CHRTYPE), "tty: not a file but a character device"),
        (
            entry("gone.png", tarfile.SYMTYPE, link="missing.png"),
            "gone.png: a link to 'missing.png', which the archive does not hold",
        ),
    ],
)
def test_a_member_that_is_not_a_file_is_named(tmp_path, member, message):
    path = tar_with(tmp_path / "odd.tar", entry("ok.png", data=b"x"), member)
    with pytest.raises(DataError) as caught:
        read(path)
    assert str(caught.value) == f"{path}: {message}"


def test_archive_names_whatever_their_case():
    assert all(archives.is_archive(Path(n)) for n in ("m.tar.gz", "M.TGZ", "m.tar", "m.tar.xz", "m.zip", "r.npz"))
    assert not any(archives.is_archive(Path(n)) for n in ("index.json", "m.gz", "tar"))
