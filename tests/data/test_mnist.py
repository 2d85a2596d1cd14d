"""pipeline/data/mnist.py: the reader `digits` of image folders: any layout of the archive,
the digits as the classes, the validation hold-out, and every fault of an archive named."""

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from support.datasets import encode, make_mnist_archive, write_archive
from support.processes import run_pipeline
from support.project import ROOT, fixture_images_sha256, write_params

from pipeline.config.loading.loader import load_params
from pipeline.data import images, mnist
from pipeline.errors import DataError
from pipeline.kinds.image_folders import ImageFoldersPreprocessConfig

WHERE = "preprocess.mnist"


def unpinned() -> ImageFoldersPreprocessConfig:
    # archives of every layout: decoding is tested here, the digest below
    preprocess = load_params(ROOT / "params.yaml", "mnist").preprocess
    assert isinstance(preprocess, ImageFoldersPreprocessConfig)
    assert (preprocess.kind, preprocess.reader, preprocess.color) == ("image_folders", "digits", "grey")
    return dataclasses.replace(preprocess, images_sha256=None)


CFG = unpinned()


@pytest.fixture(scope="module")
def cfg():
    return CFG


def out(raw_dir) -> Path:
    """Where a test prepares the download folder `raw_dir`: beside it."""
    return Path(f"{raw_dir}-prepared")


def read(raw_dir, cfg):
    """The reader's splits with no validation hold-out, each by class (the training split is
    prepared in a seeded order), and the description."""
    found = mnist.prepare(raw_dir, out(raw_dir), dataclasses.replace(cfg, validation_split=0.0), WHERE)
    assert found.samples("val") == 0
    splits = {}
    for split in ("train", "test"):
        x, y = found.head(split, 10**6)
        order = np.argsort(y, kind="stable")
        splits[split] = (x[order], y[order])
    return splits, found


def digest(found: dict) -> str:
    """images_digest of {split: (x, y)}."""
    hashes = {s: [images.sample_hash(int(label), x) for x, label in zip(*found[s])] for s in ("train", "test")}
    return images.images_digest(hashes, found["train"][0].shape[1:])


@pytest.mark.parametrize(
    "name,splits,top,ext",
    [
        ("mnist_png.tar.gz", ("training", "testing"), "mnist_png", "png"),
        ("mnist.zip", ("train", "test"), "mnist", "jpg"),
        ("flat.zip", ("train", "test"), "", "png"),
    ],
)
def test_layouts_and_formats(tmp_path, cfg, name, splits, top, ext):
    make_mnist_archive(tmp_path / name, splits=splits, top=top, ext=ext, per_class=(4, 2))
    found, stats = read(tmp_path, cfg)
    x, y = found["train"]
    assert x.shape == (40, 28, 28) and x.dtype == np.uint8
    assert np.bincount(y).tolist() == [4] * 10
    assert found["test"][0].shape == (20, 28, 28)
    # the fixture draws a bright bar whose row depends on the class
    assert x[y == 1][0][7:11, 2:12].min() > 150
    # the classes are the digits, label i the digit i
    assert stats.class_names == mnist.DIGITS and stats.num_classes == 10
    assert (stats.input, stats.shape, stats.facts.color, stats.facts.reader) == (
        "images",
        (28, 28),
        "grey",
        "digits",
    )
    assert sorted(p.name for p in out(tmp_path).iterdir() if not p.name.endswith(".bin")) == ["stats.json"]


def test_colour_images_are_converted_to_grayscale(tmp_path, cfg):
    make_mnist_archive(tmp_path / "rgb.tar.gz", mode="RGB", per_class=(1, 1))
    x, _ = read(tmp_path, cfg)[0]["train"]
    assert x.ndim == 3 and x[1][7:11, 2:12].min() > 150


def test_prepare_holds_out_validation_and_counts_classes(tmp_path, cfg):
    make_mnist_archive(tmp_path / "a.tar.gz", per_class=(10, 3))
    stats = mnist.prepare(tmp_path, out(tmp_path), cfg, WHERE)
    assert {k: s.samples for k, s in stats.splits.items()} == {"train": 90, "val": 10, "test": 30}
    assert {k: len(stats.head(k, 1000)[1]) for k in stats.splits} == {"train": 90, "val": 10, "test": 30}
    assert stats.split("test").class_counts == [3] * 10
    total = np.add(stats.split("train").class_counts, stats.split("val").class_counts)
    assert total.tolist() == [10] * 10


def bad_archive(tmp_path, name, data=None):
    img = encode(np.zeros((28, 28), np.uint8))
    members = {f"d/train/{c}/0.png": img for c in range(10)}
    members.update({f"d/test/{c}/0.png": img for c in range(10)})
    members[name] = img if data is None else data
    path = tmp_path / "bad.tar.gz"
    write_archive(path, members)
    return path


def test_non_digit_class_folder(tmp_path, cfg):
    img = encode(np.zeros((28, 28), np.uint8))
    write_archive(
        tmp_path / "bad.tar.gz", {f"d/{split}/{c}/0.png": img for split in ("train", "test") for c in ("3", "cat")}
    )
    with pytest.raises(
        DataError,
        match=r"^\S*bad.tar.gz: class folder 'cat' is not a digit 0-9 \(the reader digits of preprocess.mnist\)$",
    ):
        mnist.prepare(tmp_path, out(tmp_path), cfg, WHERE)


def test_unreadable_image_is_named(tmp_path, cfg):
    bad_archive(tmp_path, "d/test/3/broken.png", b"\x89PNG\r\n\x1a\nnot really")
    with pytest.raises(DataError, match=r"d/test/3/broken.png: unreadable image"):
        mnist.prepare(tmp_path, out(tmp_path), cfg, WHERE)


def test_non_image_file_in_a_class_folder(tmp_path, cfg):
    bad_archive(tmp_path, "d/test/3/notes.txt", b"hello")
    with pytest.raises(DataError, match=r"d/test/3/notes.txt: not a PNG or JPEG image"):
        mnist.prepare(tmp_path, out(tmp_path), cfg, WHERE)


def test_a_picture_of_another_size_is_resized_bilinearly(tmp_path, cfg):
    from PIL import Image

    big = np.random.RandomState(1).randint(0, 256, (32, 32)).astype(np.uint8)
    bad_archive(tmp_path, "d/train/4/big.png", encode(big))
    x, y = read(tmp_path, cfg)[0]["train"]
    assert x.shape == (11, 28, 28)
    resized = np.asarray(Image.fromarray(big, "L").resize((28, 28), Image.Resampling.BILINEAR))
    assert any(np.array_equal(img, resized) for img in x[y == 4])


def test_missing_split(tmp_path, cfg):
    make_mnist_archive(tmp_path / "only_train.zip", per_class=(1, 0), splits=("train", "test"))
    with pytest.raises(DataError, match=r"no test pictures: expected a folder named test or testing"):
        mnist.prepare(tmp_path, out(tmp_path), cfg, WHERE)


def test_truncated_archive(tmp_path, cfg):
    good = make_mnist_archive(tmp_path / "good.tar.gz", per_class=(3, 1))
    (tmp_path / "raw").mkdir()
    bad = tmp_path / "raw" / "bad.tar.gz"
    bad.write_bytes(good.read_bytes()[:-2000])
    with pytest.raises(DataError, match="bad.tar.gz: truncated or corrupt archive"):
        mnist.prepare(tmp_path / "raw", out(tmp_path / "raw"), cfg, WHERE)


def test_the_download_folder_holds_one_archive_at_most(tmp_path, cfg):
    make_mnist_archive(tmp_path / "a.tar.gz", per_class=(1, 1))
    make_mnist_archive(tmp_path / "b.zip", per_class=(1, 1))
    with pytest.raises(DataError, match=r"expected one archive or a folder of pictures, found 2 archives"):
        mnist.prepare(tmp_path, out(tmp_path), cfg, WHERE)
    with pytest.raises(DataError, match=r"nowhere: missing; run the download stage first"):
        mnist.prepare(tmp_path / "nowhere", out(tmp_path / "nowhere"), cfg, WHERE)


def gnu_tar(tmp_path, prepare_tree):
    """An archive made by GNU tar itself from a folder tree of the fixture's images."""
    import subprocess
    import tarfile

    tree = tmp_path / "tree"
    with tarfile.open(make_mnist_archive(tmp_path / "src.tar.gz", per_class=(3, 1))) as tf:
        tf.extractall(tree, filter="data")
    prepare_tree(tree / "mnist_png")
    (tmp_path / "raw").mkdir()
    out = tmp_path / "raw" / "mnist_png.tar.gz"
    subprocess.run(["tar", "-czf", str(out), "-C", str(tree), "mnist_png"], check=True)
    return out


def test_hard_linked_copies_from_gnu_tar_are_read_not_dropped(tmp_path, cfg):
    def link(root):
        # an identical image stored twice: GNU tar writes the second as a hard link
        copy = root / "training" / "4" / "4999.png"
        copy.hardlink_to(root / "training" / "4" / "4000.png")
        (root / "training" / "5" / "5999.png").symlink_to("../5/5000.png")

    archive = gnu_tar(tmp_path, link)
    import tarfile

    with tarfile.open(archive) as tf:
        assert any(m.islnk() for m in tf) and any(m.issym() for m in tf)
    x, y = read(archive.parent, cfg)[0]["train"]
    assert np.bincount(y).tolist() == [3, 3, 3, 3, 4, 4, 3, 3, 3, 3]
    fours = x[y == 4]  # 4000.png and its linked copy 4999.png: the same picture twice
    assert sum(np.array_equal(a, b) for i, a in enumerate(fours) for b in fours[i + 1 :]) == 1


def test_a_member_that_is_not_a_file_is_an_error(tmp_path, cfg):
    import os

    archive = gnu_tar(tmp_path, lambda root: os.mkfifo(root / "training" / "3" / "pipe.png"))
    with pytest.raises(DataError, match=r"mnist_png/training/3/pipe.png: not a file but a FIFO"):
        mnist.prepare(archive.parent, out(archive.parent), cfg, WHERE)


def test_a_link_to_a_file_the_archive_lacks_is_an_error(tmp_path, cfg):
    def dangle(root):
        (root / "training" / "2" / "2999.png").symlink_to("/nowhere/2.png")

    archive = gnu_tar(tmp_path, dangle)
    with pytest.raises(DataError, match=r"2999.png: a link to '/nowhere/2.png', which the archive does not hold"):
        mnist.prepare(archive.parent, out(archive.parent), cfg, WHERE)


@pytest.mark.parametrize("name", ["mnist.zip", "mnist_png.tar.gz"])
def test_corrupt_compressed_data_is_one_error(tmp_path, cfg, name):
    good = make_mnist_archive(tmp_path / name, per_class=(3, 1))
    data = bytearray(good.read_bytes())
    for offset in range(len(data) // 3, len(data) // 3 + 64):
        data[offset] ^= 0x5A  # inside the compressed stream
    (tmp_path / "raw").mkdir()
    bad = tmp_path / "raw" / f"bad-{name}"
    bad.write_bytes(bytes(data))
    with pytest.raises(DataError, match=rf"bad-{name}: truncated or corrupt archive: \S"):
        mnist.prepare(tmp_path / "raw", out(tmp_path / "raw"), cfg, WHERE)


def test_the_images_digest_is_what_the_archive_holds_not_how_it_is_packed(tmp_path):
    """Any faithful re-packing of the same images (another format, other file names, another
    order) shares the digest; one pixel or one label changed does not."""
    (tmp_path / "a").mkdir()
    make_mnist_archive(tmp_path / "a" / "a.tar.gz", per_class=(3, 1))
    packed = read(tmp_path / "a", CFG)[0]
    members = {}
    for split, (x, y) in packed.items():
        for i in reversed(range(len(y))):
            members[f"other/{'train' if split == 'train' else 'test'}/{y[i]}/img{i:04d}.png"] = encode(x[i])
    (tmp_path / "b").mkdir()
    write_archive(tmp_path / "b" / "b.zip", members)
    repacked = read(tmp_path / "b", CFG)[0]
    assert digest(repacked) == digest(packed) == read(tmp_path / "b", CFG)[1].facts.images_sha256
    x, y = packed["train"]
    flipped = x.copy()
    flipped[0, 0, 0] ^= 1
    assert digest({**packed, "train": (flipped, y)}) != digest(packed)
    relabelled = y.copy()
    relabelled[0] = (relabelled[0] + 1) % 10
    assert digest({**packed, "train": (x, relabelled)}) != digest(packed)
    moved = {
        "train": (x[1:], y[1:]),
        "test": (np.concatenate([packed["test"][0], x[:1]]), np.concatenate([packed["test"][1], y[:1]])),
    }
    assert digest(moved) != digest(packed)  # an image in the other split


def test_other_images_than_the_params_pin_end_the_stage_in_one_line_with_nothing_written(tmp_path):
    (tmp_path / "raw").mkdir()
    make_mnist_archive(tmp_path / "raw" / "mnist_png.tar.gz", per_class=(3, 1))  # not the test archive
    write_params(tmp_path)
    out = run_pipeline("preprocess", "mnist", "--raw", "raw", "--out", "prepared", cwd=tmp_path)
    assert out.returncode == 1, out.stderr
    assert out.stderr.strip().splitlines() == [
        "error: raw/mnist_png.tar.gz: its images are not the ones preprocess.mnist.images_sha256 "
        f"pins (expected {fixture_images_sha256()}, got "
        f"{read(tmp_path / 'raw', CFG)[1].facts.images_sha256}): "
        "another archive was downloaded"
    ]
    assert not (tmp_path / "prepared").exists()
    # unpinned: it prepares, says which digest would pin these images, and the download warns
    write_params(tmp_path, {"preprocess.mnist.images_sha256": None})
    out = run_pipeline("preprocess", "mnist", "--raw", "raw", "--out", "prepared", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    pinned = read(tmp_path / "raw", CFG)[1].facts.images_sha256
    assert f"images sha256 {pinned} (not checked: set preprocess.mnist.images_sha256" in out.stderr
