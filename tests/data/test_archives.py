"""pipeline.data.archives: every file of a zip or tar archive, member by member, in archive
order; links read through to their file; anything else one DataError naming the member."""

import io
import logging
import tarfile
import zipfile
from pathlib import Path

import pytest
from support.datasets import write_archive

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


@pytest.mark.parametrize(
    "name",
    [
        ".DS_Store",
        "train/.DS_Store",
        "pics/train/ant/.DS_Store",
        "__MACOSX/pics/train/._ant",
        "__macosx/x.png",
        "pics/train/ant/._0.png",
        "Thumbs.db",
        "pics/train/ant/thumbs.db",
        "pics/desktop.ini",
        "pics/.git/objects/ab",
        "pics/train/ant/.hidden.png",
        "./pics/.DS_Store",
    ],
)
def test_what_an_operating_system_leaves_is_told(name):
    assert archives.left_by_os(name)


@pytest.mark.parametrize("name", ["pics/train/ant/0.png", "./pics/a.png", "pics/MACOSX/a.png", "a.db", "thumbs.png"])
def test_data_is_not_what_an_operating_system_leaves(name):
    assert not archives.left_by_os(name)


def test_passed_over_counts_files_by_kind_for_one_log_line(caplog):
    passed_over = archives.PassedOver()
    names = ["a/.DS_Store", "b/.DS_Store", "__MACOSX/", "__MACOSX/a/._0.png", "a/._1.png", "Thumbs.db", "a/0.png"]
    assert [passed_over(n) for n in names] == [True, True, True, True, True, True, False]
    with caplog.at_level("INFO", logger="pipeline"):
        passed_over.log(logging.getLogger("pipeline"), "pics.zip")
        archives.PassedOver().log(logging.getLogger("pipeline"), "nothing.zip")  # nothing: no line
    assert caplog.messages == [
        "pics.zip: passed over 5 files an operating system leaves (.DS_Store, ._*, Thumbs.db, __MACOSX/): not samples"
    ]


@pytest.mark.parametrize("name", ["finder.zip", "finder.tar.gz"])
def test_entries_leave_out_what_is_passed_over_unopened(tmp_path, name):
    path = tmp_path / name
    write_archive(path, {"a/0.png": b"x", "a/.DS_Store": b"\0", "__MACOSX/a/._0.png": b"\0"})
    passed_over = archives.PassedOver()
    assert [(n, h.read()) for n, h in archives.entries(path, passed_over) if h] == [("a/0.png", b"x")]
    assert passed_over.kinds == {".DS_Store": 1, "__MACOSX/": 1}
    # without one, every member (the download stage reads them all through)
    assert len(read(path)) == 3


@pytest.mark.parametrize(
    "links,message",
    [
        ([entry("self.png", tarfile.SYMTYPE, link="self.png")], "self.png: a link loop (self.png -> self.png)"),
        (
            [entry("a.png", tarfile.SYMTYPE, link="b.png"), entry("b.png", tarfile.SYMTYPE, link="a.png")],
            "a.png: a link loop (a.png -> b.png -> a.png)",
        ),
        (
            [entry("d/a.png", tarfile.SYMTYPE, link="../d/b.png"), entry("d/b.png", tarfile.SYMTYPE, link="a.png")],
            "d/a.png: a link loop (d/a.png -> d/b.png -> d/a.png)",
        ),
        (
            [entry("hard.png", tarfile.LNKTYPE, link="hard.png")],
            "hard.png: a link to 'hard.png', which the archive does not hold",
        ),
        (
            [entry("a.png", tarfile.SYMTYPE, link="b.png"), entry("b.png", tarfile.SYMTYPE, link="gone.png")],
            "a.png: a link to 'gone.png', which the archive does not hold",
        ),
    ],
)
def test_a_link_loop_or_a_link_to_nothing_is_named_not_a_corrupt_archive(tmp_path, links, message):
    path = tar_with(tmp_path / "loop.tar", entry("ok.png", data=b"x"), *links)
    with pytest.raises(DataError) as caught:
        read(path)
    assert str(caught.value).startswith(f"{path}: {message}")


def test_links_to_links_are_read_through(tmp_path):
    path = tar_with(
        tmp_path / "chain.tar",
        entry("a.png", data=b"pixels"),
        entry("b.png", tarfile.SYMTYPE, link="a.png"),
        entry("c.png", tarfile.SYMTYPE, link="b.png"),
        entry("d.png", tarfile.LNKTYPE, link="c.png"),
    )
    assert read(path)[-1] == ("d.png", b"pixels")


@pytest.mark.parametrize("name", ["bomb.zip", "bomb.tar.gz"])
def test_a_member_is_read_with_a_cap_whatever_it_expands_to(tmp_path, name):
    import tracemalloc

    path = tmp_path / name
    if name.endswith(".zip"):
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.writestr("small.png", b"x" * 100)
            zf.writestr("bomb.png", bytes(16 << 20))  # 16 MiB of zeros
    else:
        write_archive(path, {"small.png": b"x" * 100, "bomb.png": bytes(16 << 20)})
    assert path.stat().st_size < 1 << 20
    got = {}
    tracemalloc.start()
    try:
        with pytest.raises(DataError) as caught:
            for member, handle in archives.members(path):
                got[member] = archives.read_capped(handle, f"{path}: {member}", 1 << 20)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert got == {"small.png": b"x" * 100}
    assert str(caught.value) == f"{path}: bomb.png: expected a file of at most 1,048,576 bytes, got more"
    assert peak < 8 << 20  # the cap and a chunk, not what the member expands to


def test_a_zip_header_that_understates_a_member_does_not_pass_the_cap(tmp_path):
    # the central directory says 10 bytes; the deflated data holds 4 MiB
    path = tmp_path / "liar.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("liar.png", bytes(4 << 20))
    raw = bytearray(path.read_bytes())
    central = raw.rindex(b"PK\x01\x02")
    raw[central + 24 : central + 28] = (10).to_bytes(4, "little")  # uncompressed size
    path.write_bytes(bytes(raw))
    with pytest.raises(zipfile.BadZipFile, match="Bad CRC-32"):  # zipfile stops at the declared size
        for member, handle in archives.members(path):
            archives.read_capped(handle, member, 1 << 20)
