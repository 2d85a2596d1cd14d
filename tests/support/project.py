"""The project the tests run: its root, a copy of what a clone of it holds, params.yaml with
overrides, and what its outputs and its lock are checked against."""

import dataclasses
import functools
import shutil
import subprocess
import typing
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def project_files() -> list[str]:
    """What a clone of this checkout holds: tracked files and new ones not ignored."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split("\0")
    return [name for name in listed if name and (ROOT / name).is_file()]


def copy_project(dest: Path, exclude: tuple[str, ...] = ()) -> Path:
    """A copy of what a clone of this checkout holds, in `dest`, without the paths that start
    with one of `exclude` (a folder ends with /)."""
    for name in project_files():
        if name.startswith(exclude):
            continue
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, dest / name)
    if (dest / "params.yaml").exists():  # the shipped params, but for the test archive's digest
        write_params(dest)
    return dest


def write_params(folder: Path, overrides: dict | None = None) -> Path:
    """Copy the shipped params.yaml into `folder`, with dotted-key overrides applied; MNIST's
    images digest is the test archive's (`fixture_images_sha256`) unless an override sets it."""
    from pipeline.config.commands.params_doc import format_params
    from pipeline.config.loading.loader import read_yaml

    raw = read_yaml(ROOT / "params.yaml")
    overrides = {"preprocess.mnist.images_sha256": fixture_images_sha256(), **(overrides or {})}
    for key, value in overrides.items():
        node = raw
        *parents, last = key.split(".")
        for part in parents:
            node = node[part]
        assert last in node, key
        node[last] = value
    path = Path(folder) / "params.yaml"
    path.write_text(format_params(raw))  # the shipped file's form: `dvc exp run -S` changes one line
    return path


@functools.cache
def fixture_images_sha256() -> str:
    """preprocess.mnist.images_sha256 of the tests' MNIST archive (`make_mnist_archive` with
    its defaults, what `dataset_files` serves): the shipped value pins the real 70,000 images."""
    import tempfile

    from support.datasets import make_mnist_archive  # it imports this module

    from pipeline.config.loading.loader import load_params
    from pipeline.data import images
    from pipeline.kinds.image_folders import ImageFoldersPreprocessConfig

    cfg = load_params(ROOT / "params.yaml", "mnist").preprocess
    assert isinstance(cfg, ImageFoldersPreprocessConfig)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "raw").mkdir()
        make_mnist_archive(Path(tmp) / "raw" / "mnist_png.tar.gz")
        found = images.prepare(
            Path(tmp) / "raw", Path(tmp) / "out", dataclasses.replace(cfg, images_sha256=None), "preprocess.mnist"
        )
    return found.facts.images_sha256


def unlike_plain_files(root: Path, names: typing.Iterable[str], umask: int) -> list[str]:
    """The files and folders under `root`'s `names` (outputs) whose mode is not the one a
    plain `open()` or `mkdir()` gives under `umask`, each with its mode: [] when all are."""
    found = []
    for name in names:
        for path in [root / name, *sorted((root / name).rglob("*"))]:
            if path.is_symlink():
                continue
            mode = path.stat().st_mode & 0o777
            full = 0o777 if path.is_dir() or mode & 0o111 else 0o666
            if mode != full & ~umask:
                found.append(f"{path.relative_to(root)} {mode:o}")
    return found


def marker_env(python: str, machine: str) -> dict:
    """The environment markers of CPython `python` on Linux `machine`, to read a universal lock with."""
    return {
        "python_version": python,
        "python_full_version": f"{python}.0",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "platform_machine": machine,
        "os_name": "posix",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "extra": "",
    }
