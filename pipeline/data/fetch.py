"""Fetch files over http(s) or from file:// URLs (a file, or a folder copied whole): mirrors, sha256,
retries, resume, atomic output.

A download goes to `<out>.partial/<name>.part`, is resumed from there with an HTTP Range
request after a dropped connection (or on the next run after an interrupted one), is verified,
and only when every file of the set is complete does the folder become `<out>`. So a failed
or interrupted download never leaves anything at the output path.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import http.client
import os
import shutil
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from pipeline.data import archives
from pipeline.errors import DownloadError, PipelineError
from pipeline.io import WRITE_ERRNOS, file_sha256, output_place, reading, replace_dir

if TYPE_CHECKING:  # a type alone: the config is the wing above
    from pipeline.config.keys.schema import DownloadConfig, RemoteFile

CHUNK = 1 << 20
USER_AGENT = "pipeline-fetch/1"
# A base URL holding the files under their base names; overrides download.<dataset>.mirror.
MIRROR_ENV = "PIPELINE_DATA_MIRROR"
# Beside the download folder `<out>`: where each file's bytes came from, `<out>.sources.json`
SOURCES_SUFFIX = ".sources.json"


@dataclass(frozen=True)
class FetchResult:
    name: str
    url: str  # the configured URL
    fetched_from: str  # where the bytes came from (the mirror, when it holds the file)
    sha256: str
    bytes: int
    verified: bool  # True when a configured sha256 was checked

    def described(self) -> dict:
        """What the manifest records: the data alone, the same on every host. Where the bytes
        came from (a mirror's path or address on this machine) is not the data: it is in the
        stage's log line and the sources file (`sources_path`)."""
        return {
            "name": self.name,
            "url": self.url,
            "sha256": self.sha256,
            "bytes": self.bytes,
            "verified": self.verified,
        }

    def source(self) -> dict:
        """One file's line of the sources file: its name, sha256 and where it was fetched from."""
        return {"name": self.name, "sha256": self.sha256, "fetched_from": self.fetched_from}


def sources_path(out: Path | str) -> Path:
    """The file beside the download folder `out` that says where its files were fetched from on
    this host: not a DVC out nor a git file (.gitignore); the train stage's MLflow run records
    it (`pipeline.tracking.lineage.fetch_tags`)."""
    out = Path(out)
    return out.with_name(out.name + SOURCES_SUFFIX)


class _Retryable(Exception):
    """A transient failure: worth another attempt."""


class NotHeld(DownloadError):
    """The place asked does not hold the file (no such file; HTTP 404 or 410)."""


def base_name(url: str) -> str:
    name = Path(urllib.parse.unquote(urllib.parse.urlparse(url).path)).name
    if not name:
        raise DownloadError(f"{url}: URL has no file name")
    return name


def resolve_url(url: str, mirror: str) -> str:
    """The URL to fetch: under `mirror` by the URL's base name when a mirror is set."""
    if not mirror:
        return url
    return mirror.rstrip("/") + "/" + urllib.parse.quote(base_name(url))


def pretrained_beside(prepared: Path | str) -> Path:
    """Where dvc.yaml's download stage puts a dataset's pretrained weights, beside its prepared
    folder: data/prepared/<ds> -> data/pretrained/<ds> (for the commands that take --data)."""
    prepared = Path(prepared)
    return prepared.parent.parent / "pretrained" / prepared.name


def fetch_all(
    cfg: DownloadConfig,
    out: Path,
    *,
    files: Optional[Sequence[RemoteFile]] = None,
    progress: Optional[bool] = None,
    sleep: Callable[[float], None] = time.sleep,
) -> list[FetchResult]:
    """Fetch every file of a DownloadConfig (or `files`, e.g. its pretrained weights) into the
    folder `out`, atomically; no file makes an empty folder.

    Files are looked up under the mirror (PIPELINE_DATA_MIRROR, else `cfg.mirror`) when one is
    set, and fetched from their own URL when it does not hold them (`Mirror`); a file:// URL is
    always read from its path. The retries, backoff and timeout are the config's.
    """
    out = Path(out)
    mirror = Mirror.of(cfg)
    if progress is None:
        progress = sys.stderr.isatty()
    staging = out.with_name(out.name + ".partial")
    with output_place(out):
        return _fetch_into(cfg, cfg.files if files is None else files, out, staging, mirror, progress, sleep)


def _fetch_into(cfg: DownloadConfig, files, out: Path, staging: Path, mirror: Mirror, progress: bool, sleep):
    staging.mkdir(parents=True, exist_ok=True)
    # Finished files from an earlier failed run are fetched again; only .part files are kept,
    # to resume from.
    for leftover in staging.iterdir():
        if not leftover.name.endswith(".part"):
            _remove(leftover)
    results = []
    try:
        for spec in files:
            name = base_name(spec.url)
            target = staging / name
            fetch = functools.partial(_fetch_checked, cfg, spec, target, progress=progress, sleep=sleep)
            source, digest, size = mirror.fetch(spec.url, fetch)
            results.append(FetchResult(name, spec.url, source, digest, size, bool(spec.sha256)))
    except BaseException as exc:
        # a partly fetched file (.part) stays, to resume from; nothing else does, and nothing
        # at all when the place is full or read-only
        cannot_write = isinstance(exc, OSError) and exc.errno in WRITE_ERRNOS
        if cannot_write or not any(p.name.endswith(".part") for p in staging.iterdir()):
            shutil.rmtree(staging, ignore_errors=True)
        raise
    replace_dir(staging, out)
    return results


def _fetch_checked(cfg: DownloadConfig, spec: RemoteFile, target: Path, source: str, *, progress, sleep):
    """One file from `source` (its URL, or the mirror's) to `target`, checked against its sha256
    and read through when an archive: (sha256, bytes)."""
    folder = local_folder(source)
    if folder is not None:
        digest, size = copy_folder(folder, target, source)
    else:
        digest, size = _fetch_with_retries(
            source,
            target,
            retries=cfg.retries,
            backoff=cfg.backoff_seconds,
            timeout=cfg.timeout_seconds,
            progress=progress,
            sleep=sleep,
        )
    if spec.sha256 and digest != spec.sha256.lower():
        _remove(target)
        raise DownloadError(f"{source}: sha256 mismatch: expected {spec.sha256.lower()}, got {digest}")
    verify_format(target, source)
    return digest, size


@dataclass(frozen=True)
class Mirror:
    """Where files are looked for first (a base URL holding them under their base names), and who
    set it (PIPELINE_DATA_MIRROR, or download.<ds>.mirror): a file it does not hold (no such
    file; HTTP 404 or 410) is fetched from its own URL; anything else it answers (a wrong
    sha256, a truncated archive, a server that cannot be reached) is an error naming both."""

    base: str = ""
    origin: str = ""

    @classmethod
    def of(cls, cfg: DownloadConfig) -> Mirror:
        if os.environ.get(MIRROR_ENV):
            return cls(os.environ[MIRROR_ENV], MIRROR_ENV)
        return cls(cfg.mirror, "download.mirror") if cfg.mirror else cls()

    def fetch(self, url: str, fetch: Callable[[str], tuple[str, int]]) -> tuple[str, str, int]:
        """`fetch(source)` from the mirror, else from `url`: (the source, sha256, bytes)."""
        if not self.base or _local_file(url) is not None:
            return (url, *fetch(url))
        source = resolve_url(url, self.base)
        try:
            return (source, *fetch(source))
        except NotHeld:
            pass
        except DownloadError as exc:
            raise DownloadError(f"{exc} (from the mirror {self.origin}={self.base}, for {url})") from None
        try:
            return (url, *fetch(url))
        except DownloadError as exc:
            raise DownloadError(f"{exc}; not in the mirror {self.origin}={self.base} either") from None


def verify_format(path: Path, source: str) -> None:
    """Read an archive through to its end so that a truncated or corrupt one fails here
    (zip members are checked against their CRC as they are read)."""
    if not archives.is_archive(path):
        return
    try:
        with reading(source, "truncated or corrupt archive", error=DownloadError):
            for _, handle in archives.members(path):
                while handle.read(CHUNK):
                    pass
    except PipelineError as exc:
        path.unlink()
        if isinstance(exc, DownloadError):
            raise
        raise DownloadError(str(exc).replace(str(path), source, 1)) from None


def _fetch_with_retries(source, target, *, retries, backoff, timeout, progress, sleep):
    part = target.with_name(target.name + ".part")
    last_error = "unknown error"
    for attempt in range(retries + 1):
        if attempt:
            sleep(backoff * 2 ** (attempt - 1))
        try:
            _fetch_once(source, part, timeout=timeout, progress=progress)
        except _Retryable as exc:
            last_error = str(exc)
            continue
        os.replace(part, target)
        return file_sha256(target), target.stat().st_size
    raise DownloadError(f"{source}: {last_error} (gave up after {retries + 1} attempts)")


def _fetch_once(source: str, part: Path, *, timeout: float, progress: bool) -> None:
    scheme = urllib.parse.urlparse(source).scheme
    if scheme == "file":
        _copy_file(source, part)
        return
    if scheme not in ("http", "https"):
        raise DownloadError(f"{source}: unsupported URL scheme {scheme!r} (expected http, https or file)")
    have = part.stat().st_size if part.exists() else 0
    request = urllib.request.Request(source, headers={"User-Agent": USER_AGENT})
    if have:
        request.add_header("Range", f"bytes={have}-")
    try:
        response = urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and have:
            part.unlink()  # our partial file is no prefix of theirs: start over
            raise _Retryable("server refused to resume; restarting") from None
        if exc.code >= 500 or exc.code in (408, 429):
            raise _Retryable(f"HTTP {exc.code} {exc.reason}") from None
        error = NotHeld if exc.code in (404, 410) else DownloadError
        raise error(f"{source}: HTTP {exc.code} {exc.reason}") from None
    except (TimeoutError, urllib.error.URLError, ConnectionError, http.client.HTTPException) as exc:
        reason = getattr(exc, "reason", exc)
        raise _Retryable(f"cannot connect: {reason}") from None
    with response:
        if have and response.status == 206:
            mode = "ab"
        else:
            mode, have = "wb", 0
        length = response.headers.get("Content-Length")
        expected = have + int(length) if length is not None else None
        from tqdm import tqdm

        with (
            open(part, mode) as fh,
            tqdm(
                total=expected,
                initial=have,
                unit="B",
                unit_scale=True,
                unit_divisor=1024,
                desc=part.name[: -len(".part")],
                disable=not progress,
                leave=False,
            ) as bar,
        ):
            while True:
                try:
                    chunk = response.read(CHUNK)
                except (TimeoutError, ConnectionError, http.client.HTTPException, OSError) as exc:
                    raise _Retryable(f"connection dropped: {exc}") from None
                if not chunk:
                    break
                fh.write(chunk)  # a full disk is the output's problem (io.output_place)
                bar.update(len(chunk))
    got = part.stat().st_size
    if expected is not None and got != expected:
        raise _Retryable(f"connection dropped after {got} of {expected} bytes")


@contextlib.contextmanager
def at_hand(cfg: DownloadConfig) -> Iterator[Path]:
    """A folder holding the files of a DownloadConfig as the download stage's would, for
    reading them before any stage runs (`pipeline add`): file:// URLs as links to their files
    or folders, each under the name the stage gives its copy; anything else fetched into a
    temporary folder (mirror, sha256, retries as the stage's), removed afterwards. An error while the folder is read
    names each file by its URL, not by the temporary folder."""
    urls = [f.url for f in cfg.files]
    local = [_local_file(url) for url in urls]
    with tempfile.TemporaryDirectory(prefix="pipeline-add-") as tmp:
        folder = Path(tmp) / "files"
        if all(path is not None for path in local):
            folder.mkdir()
            for url, path in zip(urls, local):  # each where the stage copies it: under its base name
                if path is None or not path.exists():
                    raise DownloadError(f"{url}: no such file or folder")
                (folder / base_name(url)).symlink_to(path.resolve())
        else:
            fetch_all(cfg, folder)
        try:
            yield folder
        except PipelineError as exc:
            message = str(exc)
            for url in urls:
                message = message.replace(str(folder / base_name(url)), url)
            raise type(exc)(message.replace(str(folder), "the files of " + " ".join(urls))) from None


def _local_file(source: str) -> Optional[Path]:
    """The path a file:// URL names, or None (not a local file:// URL)."""
    parsed = urllib.parse.urlparse(source)
    if parsed.scheme != "file" or parsed.netloc not in ("", "localhost"):
        return None
    return Path(urllib.request.url2pathname(parsed.path))


def local_folder(source: str) -> Optional[Path]:
    """The folder a file:// URL names, or None (not a file:// URL, or not a folder)."""
    path = _local_file(source)
    return path if path is not None and path.is_dir() else None


def copy_folder(folder: Path, target: Path, source: str) -> tuple[str, int]:
    """Copy a local folder (a user's image folders) to `target`: (its digest, its bytes). The
    digest is the sha256 of each file's path below the folder and sha256, sorted (what
    download.<dataset>.files[].sha256 pins for a folder, and the manifest records)."""
    lines, size = [], 0
    for path in sorted(p for p in folder.rglob("*") if not p.is_dir()):
        if not path.is_file():
            raise DownloadError(f"{source}: {path.relative_to(folder)}: not a file")
        with reading(path, "cannot read", error=DownloadError):
            lines.append(f"{path.relative_to(folder).as_posix()} {file_sha256(path)}\n")
        size += path.stat().st_size
    if not lines:
        raise DownloadError(f"{source}: an empty folder")
    shutil.copytree(folder, target)
    return hashlib.sha256("".join(lines).encode()).hexdigest(), size


def _copy_file(source: str, part: Path) -> None:
    parsed = urllib.parse.urlparse(source)
    path = Path(urllib.request.url2pathname(parsed.path))
    if parsed.netloc not in ("", "localhost"):
        raise DownloadError(f"{source}: file:// URLs must name a local path")
    if not path.exists():
        raise NotHeld(f"{source}: no such file")
    if not path.is_file():
        raise DownloadError(f"{source}: not a file")
    try:
        src = open(path, "rb")
    except OSError as exc:
        raise DownloadError(f"{source}: cannot read: {exc.strerror}") from None
    with src, open(part, "wb") as dst:  # a full disk is the output's problem (io.output_place)
        shutil.copyfileobj(src, dst, CHUNK)


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink()
