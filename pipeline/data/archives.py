"""zip and tar archives, read member by member: every file in them, and an error for anything
that is neither a file nor a folder, so that no member is silently left out.

A tar archive may store a file a second time as a hard link (GNU tar does so for identical
files) or as a symbolic link: both are read through to the file they name.
"""

from __future__ import annotations

import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Optional

from pipeline.errors import DataError

TAR_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".tar.bz2", ".tbz2", ".tar.xz", ".txz")
ZIP_SUFFIXES = (".zip", ".npz")


def is_archive(path: Path) -> bool:
    return path.name.lower().endswith(TAR_SUFFIXES + ZIP_SUFFIXES)


def members(path: Path | str) -> Iterator[tuple[str, IO[bytes]]]:
    """(name, open file) of every file in the archive at `path`, in archive order; folders
    skipped. Decompression errors come out of the library as they are (see io.reading)."""
    for name, handle in entries(path):
        if handle is not None:
            yield name, handle


def entries(path: Path | str) -> Iterator[tuple[str, Optional[IO[bytes]]]]:
    """`members`, and (name ending in "/", None) for each folder the archive records (an empty
    one included)."""
    path = Path(path)
    if path.name.lower().endswith(ZIP_SUFFIXES):
        with zipfile.ZipFile(path) as zf:
            for info in zf.infolist():
                if info.is_dir():
                    yield info.filename.rstrip("/") + "/", None
                    continue
                with zf.open(info) as member_file:
                    yield info.filename, member_file
        return
    with tarfile.open(path) as tf:
        for member in tf:
            if member.isdir():
                yield member.name.rstrip("/") + "/", None
                continue
            if not (member.isfile() or member.islnk() or member.issym()):
                kind = {
                    tarfile.CHRTYPE: "a character device",
                    tarfile.BLKTYPE: "a block device",
                    tarfile.FIFOTYPE: "a FIFO",
                }.get(member.type, f"of tar type {member.type!r}")
                raise DataError(f"{path}: {member.name}: not a file but {kind}")
            try:
                handle = tf.extractfile(member)
            except KeyError:
                raise DataError(
                    f"{path}: {member.name}: a link to {member.linkname!r}, which the archive does not hold"
                ) from None
            if handle is None:  # a link that resolves to a folder or a special file
                raise DataError(f"{path}: {member.name}: a link to {member.linkname!r}, which is not a file")
            with handle:
                yield member.name, handle
