"""zip and tar archives, read member by member: every file in them, and an error for anything
that is neither a file nor a folder, so that no member is silently left out.

A tar archive may store a file a second time as a hard link (GNU tar does so for identical
files) or as a symbolic link: both are read through to the file they name; a link that leads
back to itself (a link loop) is an error naming the member.

What an operating system leaves in a folder or an archive (`left_by_os`: macOS' `.DS_Store`,
`__MACOSX/` and `._*`, Windows' `Thumbs.db` and `desktop.ini`, any hidden file or folder) is
not data: the readers pass over it and count it (`PassedOver`), never read it. A member is
read with a cap (`read_capped`): what a small archive expands to never costs more memory than
the cap, whatever its header declares.
"""

from __future__ import annotations

import logging
import tarfile
import zipfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import IO, Optional

from pipeline.errors import DataError

TAR_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".tar.bz2", ".tbz2", ".tar.xz", ".txz")
ZIP_SUFFIXES = (".zip", ".npz")
# file names Windows leaves in a folder it shows (its thumbnails and folder settings), and
# macOS' custom folder icon; any name starting with "." is hidden on every system
OS_FILES = frozenset({"thumbs.db", "ehthumbs.db", "ehthumbs_vista.db", "desktop.ini", "icon\r"})
OS_FOLDERS = frozenset({"__macosx"})  # the resource forks macOS' Finder adds to a zip it makes
CHUNK = 1 << 20


def is_archive(path: Path) -> bool:
    return path.name.lower().endswith(TAR_SUFFIXES + ZIP_SUFFIXES)


def left_by_os(name: str) -> bool:
    """Whether a path (in an archive or under a folder, "/"-separated) is something an operating
    system leaves rather than data: a hidden file or anything in a hidden folder (a part
    starting with "."), anything under `__MACOSX/`, `Thumbs.db`, `desktop.ini`."""
    parts = [p for p in PurePosixPath(name).parts if p not in ("", ".", "..", "/")]
    if any(p.startswith(".") or p.lower() in OS_FOLDERS for p in parts):
        return True
    return bool(parts) and parts[-1].lower() in OS_FILES


class PassedOver:
    """Counts what `left_by_os` passes over in one reading, for its one log line."""

    def __init__(self) -> None:
        self.kinds: Counter[str] = Counter()

    def __call__(self, name: str) -> bool:
        """Whether `name` is passed over (a file of it counted; a folder not)."""
        if not left_by_os(name):
            return False
        if not name.endswith("/"):
            self.kinds[_kind(name)] += 1
        return True

    def log(self, log: logging.Logger, where: Path | str) -> None:
        """One info line when anything was passed over: how many files, of which kinds."""
        if self.kinds:
            count = sum(self.kinds.values())
            kinds = ", ".join(sorted(self.kinds))
            log.info(
                "%s: passed over %d file%s an operating system leaves (%s): not samples",
                where,
                count,
                "" if count == 1 else "s",
                kinds,
            )


def _kind(name: str) -> str:
    """What a passed over file is, for the log: `__MACOSX/`, a hidden folder (`.git/`), `._*`
    (macOS' resource forks), or its own name (`.DS_Store`, `Thumbs.db`)."""
    parts = [p for p in PurePosixPath(name).parts if p not in ("", ".", "..", "/")]
    for part in parts[:-1]:
        if part.lower() in OS_FOLDERS or part.startswith("."):
            return part + "/"
    return "._*" if parts[-1].startswith("._") else parts[-1]


def read_capped(handle: IO[bytes], name: str, limit: int) -> bytes:
    """The bytes of `handle`, read a MiB at a time: a DataError naming `name` as soon as it
    holds more than `limit` bytes (what it expands to, not what an archive's header says)."""
    data = bytearray()
    while True:
        chunk = handle.read(min(CHUNK, limit + 1 - len(data)))
        if not chunk:
            return bytes(data)
        data += chunk
        if len(data) > limit:
            raise DataError(f"{name}: expected a file of at most {limit:,} bytes, got more")


def members(path: Path | str) -> Iterator[tuple[str, IO[bytes]]]:
    """(name, open file) of every file in the archive at `path`, in archive order; folders
    skipped. Decompression errors come out of the library as they are (see io.reading)."""
    for name, handle in entries(path):
        if handle is not None:
            yield name, handle


def entries(path: Path | str, passed_over: Optional[PassedOver] = None) -> Iterator[tuple[str, Optional[IO[bytes]]]]:
    """`members`, and (name ending in "/", None) for each folder the archive records (an empty
    one included). With `passed_over`, what it passes over is left out, never opened."""
    path = Path(path)
    if path.name.lower().endswith(ZIP_SUFFIXES):
        with zipfile.ZipFile(path) as zf:
            for info in zf.infolist():
                name = info.filename.rstrip("/") + "/" if info.is_dir() else info.filename
                if passed_over is not None and passed_over(name):
                    continue
                if info.is_dir():
                    yield name, None
                    continue
                with zf.open(info) as member_file:
                    yield name, member_file
        return
    with tarfile.open(path) as tf:
        for member in tf:
            name = member.name.rstrip("/") + "/" if member.isdir() else member.name
            if passed_over is not None and passed_over(name):
                continue
            if member.isdir():
                yield name, None
                continue
            if not (member.isfile() or member.islnk() or member.issym()):
                raise DataError(f"{path}: {member.name}: not a file but {_tar_kind(member)}")
            handle = tf.extractfile(_link_target(tf, member, path))
            if handle is None:  # a link that resolves to a folder or a special file
                raise DataError(f"{path}: {member.name}: a link to {member.linkname!r}, which is not a file")
            with handle:
                yield name, handle


def _tar_kind(member: tarfile.TarInfo) -> str:
    return {
        tarfile.CHRTYPE: "a character device",
        tarfile.BLKTYPE: "a block device",
        tarfile.FIFOTYPE: "a FIFO",
    }.get(member.type, f"of tar type {member.type!r}")


def _link_target(tf: tarfile.TarFile, member: tarfile.TarInfo, path: Path) -> tarfile.TarInfo:
    """The member a hard or symbolic link leads to, through links to links (as tarfile finds
    each one); the member itself when it is no link. A DataError naming `member` for a link to
    a name the archive lacks, or a chain of links that comes back to one of its links (tarfile
    would recurse until Python's stack runs out)."""
    chain = [member]
    seen = {member.offset}
    current = member
    while current.islnk() or current.issym():
        try:
            # how tarfile.extractfile looks a link up (a private method since Python 2.6)
            current = tf._find_link_target(current)  # type: ignore[attr-defined]
        except KeyError:
            raise DataError(
                f"{path}: {member.name}: a link to {chain[-1].linkname!r}, which the archive does not hold"
            ) from None
        if current.offset in seen:
            names = " -> ".join(m.name for m in chain + [current])
            raise DataError(f"{path}: {member.name}: a link loop ({names}); expected a link to a file")
        seen.add(current.offset)
        chain.append(current)
    return current
