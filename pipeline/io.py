"""Atomic writes: a path holds either a complete file or nothing, for every file the project
writes (stage outputs, backups, markers): write to a temporary sibling, then rename."""

from __future__ import annotations

import contextlib
import csv
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterable, Iterator


@contextlib.contextmanager
def atomic_dir(out: Path | str) -> Iterator[Path]:
    """Yield an empty sibling folder of `out`; on success it replaces `out`, on error it is removed."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        yield tmp
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
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_json(path: Path | str, data: Any) -> None:
    with atomic_file(path) as tmp:
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def write_csv(path: Path | str, rows: list[dict], columns: Iterable[str]) -> None:
    """Rows of dicts as CSV with a header; floats with 6 significant digits."""
    with atomic_file(path) as tmp, open(tmp, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(columns))
        writer.writeheader()
        for row in rows:
            writer.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in row.items()})


def read_json(path: Path | str) -> Any:
    """Parse a JSON file that an earlier stage wrote; a missing or broken one is a DataError."""
    from pipeline.errors import DataError

    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"{path}: missing; run the stage that writes it first") from None
    except (OSError, ValueError) as exc:
        raise DataError(f"{path}: not readable JSON: {exc}") from None
