"""Atomic writes: a path holds either a complete file or nothing, for every file the project
writes (stage outputs, backups, markers): write to a temporary sibling, then rename. Locks
between processes, for a read-check-write of files that several commands change. And the
reading side: what the file-format libraries raise on a file that is cut short or corrupt
becomes one error naming the file."""

from __future__ import annotations

import contextlib
import csv
import errno
import fcntl
import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import threading
import time
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Optional

from pipeline.errors import DataError, OutputError, PipelineError

# The place an output goes to cannot take it: the disk or quota is full, it is read-only, or
# not ours. What the user fixes is the place, not the data.
WRITE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM}
log = logging.getLogger("pipeline")


@contextlib.contextmanager
def output_place(path: Path | str) -> Iterator[None]:
    """Turn an OS error that says the place cannot take the output (full, read-only, not
    ours) into one OutputError naming the output (the file the error names, else `path`);
    other errors pass."""
    try:
        yield
    except OSError as exc:
        if exc.errno not in WRITE_ERRNOS:
            raise
        raise OutputError(f"{_output_of(exc.filename) or _output_of(path)}: cannot write: {exc.strerror}") from None


def _output_of(name) -> Optional[Path]:
    """The output a file name belongs to: a temporary `.<name>.<random>.tmp` (or anything
    inside one) stands for `<name>`."""
    if not isinstance(name, (str, os.PathLike)):
        return None
    path = Path(name)
    for candidate in (path, *path.parents):
        found = re.fullmatch(r"\.(.+)\.[^.]+\.tmp", candidate.name)
        if found:
            return candidate.parent / found.group(1)
    return path


def _umask() -> int:
    """The process's umask, read without changing it (os.umask can only be read by setting it,
    which would race with other threads creating files)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _plain_mode(tmp: Path) -> None:
    """Give a finished temporary file or folder the mode a plain `open()` or `mkdir()` would
    have given it under the umask: mkstemp and mkdtemp make them 0600 and 0700 whatever the
    umask, and a rename keeps that, so a teammate, a web server or another uid in a container
    could not read the outputs. A file that was made executable stays so."""
    mode = tmp.stat().st_mode
    full = 0o777 if tmp.is_dir() or mode & 0o111 else 0o666
    os.chmod(tmp, full & ~_umask())


def _clear_stale(path: Path) -> None:
    """Remove the temporary siblings that a killed writer of `path` left (SIGKILL leaves no
    chance to clean up): its next write starts clean. One writer per output: DVC locks the
    repository while a stage runs."""
    # `..<name>.<random>.tmp.<random>.tmp` too: a temporary of the temporary, which a writer
    # inside `atomic_outputs` (write_csv, write_json) leaves when it is killed mid-write
    for stale in [*path.parent.glob(f".{path.name}.*.tmp"), *path.parent.glob(f"..{path.name}.*.tmp")]:
        if stale.is_dir() and not stale.is_symlink():
            shutil.rmtree(stale, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                stale.unlink()


@contextlib.contextmanager
def atomic_dir(out: Path | str) -> Iterator[Path]:
    """Yield an empty sibling folder of `out`; on success it replaces `out`, on error it is removed."""
    out = Path(out)
    with output_place(out):
        out.parent.mkdir(parents=True, exist_ok=True)
        _clear_stale(out)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
        try:
            yield tmp
            _plain_mode(tmp)
            replace_dir(tmp, out)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise


def replace_dir(src: Path, out: Path) -> None:
    """Move the finished folder `src` to `out`, replacing whatever was there."""
    if out.is_dir() and not out.is_symlink():
        shutil.rmtree(out)
    elif out.exists() or out.is_symlink():
        out.unlink()
    os.replace(src, out)


@contextlib.contextmanager
def atomic_file(path: Path | str) -> Iterator[Path]:
    """Yield a temporary path beside `path`; on success it is renamed to `path`."""
    path = Path(path)
    with output_place(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        _clear_stale(path)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
        try:
            yield Path(tmp)
            _plain_mode(Path(tmp))
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise


@contextlib.contextmanager
def atomic_outputs(*paths: Path | str, folders: Iterable[Path | str] = ()) -> Iterator[tuple[Path, ...]]:
    """Temporary siblings of several outputs (files, and folders for the paths in `folders`):
    when the block succeeds they all replace their outputs, when it fails none does, so that a
    stage's outputs appear together or not at all."""
    folders = {Path(f) for f in folders}
    common = Path(os.path.commonpath([Path(p).absolute() for p in paths]))
    with contextlib.ExitStack() as stack:
        temporary = tuple(stack.enter_context(atomic_dir(p) if Path(p) in folders else atomic_file(p)) for p in paths)
        with output_place(common):  # named here, before each output's own clean-up sees it
            yield temporary


@contextlib.contextmanager
def locked(path: Path | str, timeout: Optional[float] = None, held_by: str = "another process") -> Iterator[None]:
    """An exclusive lock between processes on the file `path` (created when missing; flock, so
    a process that dies lets go), held while the block runs. Another holder makes this one wait
    its turn; with `timeout`, for that many seconds at most, then one PipelineError naming the
    lock and `held_by`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | (fcntl.LOCK_NB if deadline is not None else 0))
                break
            except BlockingIOError:
                if deadline is not None and time.monotonic() >= deadline:
                    raise PipelineError(
                        f"{path}: held by {held_by} for {timeout:g} s; try again once it has ended"
                    ) from None
                time.sleep(0.05)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def write_json(path: Path | str, data: Any) -> None:
    with atomic_file(path) as tmp:
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def file_sha256(path: Path | str) -> str:
    """The sha256 of a file's bytes, read a MiB at a time."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def write_csv(path: Path | str, rows: list[dict], columns: Iterable[str], digits: Optional[int] = None) -> None:
    """Rows of dicts as CSV with a header and "\\n" line ends, `columns` of each (a row may hold
    more); floats in full, or with `digits` significant digits."""
    columns = list(columns)
    with atomic_file(path) as tmp, open(tmp, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns, lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: _cell(row[k], digits) for k in columns})


def _cell(value, digits: Optional[int]):
    return f"{value:.{digits}g}" if digits and isinstance(value, float) else value


# warnings.catch_warnings swaps process-wide state: one thread in a `reading` block at a time
# (nested blocks of the same thread are fine), so that a server's threads cannot restore each
# other's state
_WARNINGS = threading.RLock()


@contextlib.contextmanager
def reading(path: Path | str, what: str = "cannot read", error: type | None = None) -> Iterator[None]:
    """Turn what a file-format library raises while parsing `path` into one `error` (DataError
    by default): `<path>: <what>: <the library's message on one line>`. Errors of the project's
    own pass through.

    Any exception counts: on damaged input zipfile, tarfile, zlib, numpy's header parser and
    unpickler and Pillow raise far more kinds than they document (found by tests/scenarios/test_fuzz.py:
    SyntaxError, tokenize.TokenError, NotImplementedError, RuntimeError among them), so keep
    the block to the parsing itself (and never `yield` to a caller from inside it).

    What the libraries warn about meanwhile (Pillow's DecompressionBombWarning, NumPy's and
    tarfile's warnings) never reaches the terminal beside the one error line: the project's
    own checks judge the data, so a warning is dropped, shown with `pipeline -v` alone when
    the block succeeds."""
    with _WARNINGS, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        except PipelineError:
            raise
        except FileNotFoundError:
            raise (error or DataError)(f"{path}: missing") from None
        except Exception as exc:  # noqa: BLE001 - see above
            detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc) or type(exc).__name__
            raise (error or DataError)(f"{path}: {what}: {' '.join(detail.split())}") from None
    for warning in caught:
        log.debug("%s: %s: %s (passed over)", path, warning.category.__name__, " ".join(str(warning.message).split()))


def read_json(path: Path | str) -> Any:
    """Parse a JSON file that an earlier stage wrote; a missing or broken one is a DataError."""
    if not Path(path).is_file():
        raise DataError(f"{path}: missing; run the stage that writes it first")
    with reading(path, "not readable JSON"):
        return json.loads(Path(path).read_text(encoding="utf-8"))
