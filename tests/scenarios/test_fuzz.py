"""Property-based fuzzing of what reads user input: the params loader, the archive readers and
the prepared-array reader. The only outcomes allowed: a valid result, or the project's own
error (one line, ConfigError -> exit 2, DataError -> exit 1), with nothing at the output path.

Each test runs PIPELINE_FUZZ_EXAMPLES examples (default 40, as CI runs them); set it higher to
search longer, for example PIPELINE_FUZZ_EXAMPLES=2000 python -m pytest tests/scenarios/test_fuzz.py.
"""

import dataclasses
import io
import os
import tempfile
from pathlib import Path

import numpy as np
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.datasets import make_mnist_archive, make_reuters_npz, make_word_index
from support.project import ROOT

from pipeline.config.loading.loader import load_params
from pipeline.data import mnist, prepared, reuters
from pipeline.errors import ConfigError, DataError
from pipeline.kinds.image_folders import ImageFoldersPreprocessConfig
from pipeline.kinds.labelled_texts import ReutersPreprocessConfig, full_length_facts

EXAMPLES = int(os.environ.get("PIPELINE_FUZZ_EXAMPLES") or "40")
fuzz = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=not os.environ.get("PIPELINE_FUZZ_EXAMPLES"),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

SHIPPED = yaml.safe_load((ROOT / "params.yaml").read_text())
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True), st.text(max_size=12)
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=6,
)


def key_paths(node, prefix=()):
    if isinstance(node, dict):
        for key, child in node.items():
            yield prefix + (key,)
            yield from key_paths(child, prefix + (key,))
    elif isinstance(node, list):
        for i, child in enumerate(node):
            yield prefix + (i,)
            yield from key_paths(child, prefix + (i,))


PATHS = list(key_paths(SHIPPED))


def one_line_error(exc, cls):
    assert isinstance(exc, cls), f"{type(exc).__name__}: {exc}"
    assert "\n" not in str(exc) and str(exc).strip()


def load(text_or_bytes):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "params.yaml"
        if isinstance(text_or_bytes, bytes):
            path.write_bytes(text_or_bytes)
        else:
            path.write_text(text_or_bytes)
        for dataset in ("reuters", "mnist"):
            load_params(path, dataset)


def outcome_of_params(document):
    try:
        load(document)
    except Exception as exc:  # noqa: BLE001 - the property: only ConfigError
        one_line_error(exc, ConfigError)


@fuzz
@given(path=st.sampled_from(PATHS), value=values)
def test_params_with_one_value_replaced(path, value):
    import copy

    raw = copy.deepcopy(SHIPPED)
    node = raw
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    outcome_of_params(yaml.safe_dump(raw, allow_unicode=True))


@fuzz
@given(path=st.sampled_from(PATHS))
def test_params_with_one_key_removed(path):
    import copy

    raw = copy.deepcopy(SHIPPED)
    node = raw
    for part in path[:-1]:
        node = node[part]
    del node[path[-1]]
    outcome_of_params(yaml.safe_dump(raw))


@fuzz
@given(document=values)
def test_any_yaml_document(document):
    outcome_of_params(yaml.safe_dump(document))


@fuzz
@given(data=st.binary(max_size=400), keep=st.integers(0, 3000))
def test_random_bytes_and_cut_short_params(data, keep):
    shipped = (ROOT / "params.yaml").read_bytes()
    outcome_of_params(data)
    outcome_of_params(shipped[:keep] + data[:8])


# Real-format files, damaged: cut short at a random point, or bytes flipped at random places.
def damaged(original: bytes, draw_cut, flips):
    data = bytearray(original[:draw_cut] if draw_cut is not None else original)
    for offset, mask in flips:
        if data:
            data[offset % len(data)] ^= mask or 1
    return bytes(data)


damage = dict(
    cut=st.one_of(st.none(), st.integers(0, 10**6)),
    flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=6),
)


def fixture_bytes(name):
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        if name == "reuters.npz":
            make_reuters_npz(folder / name, n=60)
        elif name == "prepared":
            x, y = np.arange(60, dtype=np.int32).reshape(20, 3), np.arange(20, dtype=np.int32) % 4
            found = prepared.write_arrays(
                folder / name, {"train": (x, y)}, input_="sequences", class_names=list("abcd"),
                facts=full_length_facts(3, 60),
            )  # fmt: skip
            return (found.shard_paths("train")[0]).read_bytes()
        else:
            make_mnist_archive(folder / name, per_class=(2, 1))
        return (folder / name).read_bytes()


FIXTURES = {name: fixture_bytes(name) for name in ("mnist_png.tar.gz", "mnist.zip", "reuters.npz", "prepared")}


@fuzz
@given(name=st.sampled_from(["mnist_png.tar.gz", "mnist.zip"]), **damage)
def test_damaged_image_archives_prepare_or_fail_in_one_line(tmp_path_factory, name, cut, flips):
    folder = tmp_path_factory.mktemp("raw")
    (folder / name).write_bytes(damaged(FIXTURES[name], cut, flips))
    preprocess = load_params(ROOT / "params.yaml", "mnist").preprocess
    assert isinstance(preprocess, ImageFoldersPreprocessConfig)
    cfg = dataclasses.replace(preprocess, images_sha256=None)  # decoding, not the digest
    out = folder / "prepared"
    try:
        found = mnist.prepare(folder, out, cfg, "preprocess.mnist")
    except Exception as exc:  # noqa: BLE001
        one_line_error(exc, DataError)
        assert not out.exists() and sorted(p.name for p in folder.iterdir()) == [name]
        return
    assert sum(s.samples for s in found.splits.values()) == 30  # every image, none dropped
    found.check(*found.splits)


@fuzz
@given(**damage)
def test_damaged_reuters_npz_prepares_or_fails_in_one_line(tmp_path_factory, cut, flips):
    folder = tmp_path_factory.mktemp("raw")
    (folder / "reuters.npz").write_bytes(damaged(FIXTURES["reuters.npz"], cut, flips))
    make_word_index(folder / "reuters_word_index.json")
    cfg = load_params(ROOT / "params.yaml", "reuters").preprocess
    assert isinstance(cfg, ReutersPreprocessConfig)
    try:
        found = reuters.prepare(folder, folder / "prepared", cfg, "preprocess.reuters")
    except Exception as exc:  # noqa: BLE001
        one_line_error(exc, DataError)
        assert not (folder / "prepared").exists()
        return
    assert sum(s.samples for s in found.splits.values()) == 60


@fuzz
@given(**damage)
def test_a_damaged_shard_is_checked_or_fails_in_one_line(tmp_path_factory, cut, flips):
    """A shard cut short or with bytes flipped: the check before a split is read names it in
    one line, unless the damage left it as it was."""
    folder = tmp_path_factory.mktemp("prepared")
    x, y = np.arange(60, dtype=np.int32).reshape(20, 3), np.arange(20, dtype=np.int32) % 4
    found = prepared.write_arrays(
        folder / "p", {"train": (x, y)}, input_="sequences", class_names=list("abcd"), facts=full_length_facts(3, 60)
    )
    shard = found.shard_paths("train")[0]
    data = damaged(FIXTURES["prepared"], cut, flips)
    shard.write_bytes(data)
    try:
        found.check("train")
    except Exception as exc:  # noqa: BLE001
        one_line_error(exc, DataError)
        assert str(shard) in str(exc)
        return
    assert data == FIXTURES["prepared"]  # only an undamaged shard passes
    assert found.head("train", 100)[0].tolist() == x.tolist()


@fuzz
@given(
    kinds=st.lists(
        st.sampled_from(["file", "dir", "hardlink", "symlink", "dangling", "fifo", "chrdev"]), min_size=1, max_size=5
    )
)
def test_archive_member_types(tmp_path_factory, kinds):
    import tarfile

    folder = tmp_path_factory.mktemp("raw")
    archive = folder / "mnist_png.tar.gz"
    base = io.BytesIO(FIXTURES["mnist_png.tar.gz"])
    with tarfile.open(fileobj=base) as src, tarfile.open(archive, "w:gz") as dst:
        members: list[tuple[tarfile.TarInfo, bytes | None]] = []
        for m in src:
            file = src.extractfile(m) if m.isfile() else None
            members.append((m, file.read() if file is not None else None))
        for member, data in members:
            dst.addfile(member, io.BytesIO(data) if data is not None else None)
        first = next(m for m, _ in members if m.isfile())
        for i, kind in enumerate(kinds):
            info = tarfile.TarInfo(f"{first.name.rsplit('/', 1)[0]}/extra{i}.png")
            info.type = {
                "file": tarfile.REGTYPE,
                "dir": tarfile.DIRTYPE,
                "hardlink": tarfile.LNKTYPE,
                "symlink": tarfile.SYMTYPE,
                "dangling": tarfile.SYMTYPE,
                "fifo": tarfile.FIFOTYPE,
                "chrdev": tarfile.CHRTYPE,
            }[kind]
            info.linkname = {
                "hardlink": first.name,
                "symlink": first.name.rsplit("/", 1)[1],
                "dangling": "missing.png",
            }.get(kind, "")
            payload = dict(members)[first] if kind == "file" else None
            info.size = len(payload) if payload is not None else 0
            dst.addfile(info, io.BytesIO(payload) if payload is not None else None)
    preprocess = load_params(ROOT / "params.yaml", "mnist").preprocess
    assert isinstance(preprocess, ImageFoldersPreprocessConfig)
    cfg = dataclasses.replace(preprocess, images_sha256=None)  # decoding, not the digest
    try:
        found = mnist.prepare(folder, folder.parent / f"{folder.name}-prepared", cfg, "preprocess.mnist")
    except Exception as exc:  # noqa: BLE001
        one_line_error(exc, DataError)
        assert set(kinds) & {"dangling", "fifo", "chrdev"}  # a folder inside a class folder is passed over
        return
    assert not set(kinds) & {"dangling", "fifo", "chrdev"}
    readable = sum(kind in ("file", "hardlink", "symlink") for kind in kinds)
    assert sum(s.samples for s in found.splits.values()) == 30 + readable  # none dropped
