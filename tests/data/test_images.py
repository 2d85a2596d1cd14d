"""The `folders` reader of image_folders datasets (pipeline/data/images.py): class folders,
split names, archive or folder, resizing, colour, transparency, the images digest, and bad
inputs through the real `pipeline preprocess` command."""

import dataclasses
import io
import struct
import tarfile
import typing
import zipfile
import zlib
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import yaml
from PIL import Image
from support.processes import run_pipeline
from support.project import ROOT

from pipeline.config.loading.loader import load_params
from pipeline.data import images, prepared, splits
from pipeline.errors import DataError
from pipeline.kinds.image_folders import ImageFoldersPreprocessConfig

# class folder -> the grey level its pictures are filled with; sorted: Bee < ant < zebra
SHADES = {"zebra": 200, "ant": 40, "Bee": 120}


def pics_config() -> ImageFoldersPreprocessConfig:
    preprocess = load_params(ROOT / "params.yaml", "mnist").preprocess
    assert isinstance(preprocess, ImageFoldersPreprocessConfig)
    return dataclasses.replace(preprocess, reader="folders", image_size=8, color="grey", images_sha256=None)


@pytest.fixture(scope="module")
def cfg() -> ImageFoldersPreprocessConfig:
    return pics_config()


def read_splits(raw: Path, size: int, color: typing.Literal["grey", "rgb"]) -> tuple[str, dict, list[str]]:
    """(the pictures' digest, {'train': (x, y), 'test': (x, y)} by class, the class names):
    what preprocess prepares of the download folder `raw`, with no hold-out."""
    cfg = dataclasses.replace(pics_config(), image_size=size, color=color, validation_split=0.0)
    found = images.prepare(raw, raw.parent / f"prepared-{size}-{color}", cfg, "preprocess.pics")
    out = {}
    for split in ("train", "test"):
        x, y = found.head(split, 10**6)
        order = np.argsort(y, kind="stable")
        out[split] = (x[order], y[order])
    return found.facts.images_sha256, out, found.class_names


def prepare(raw: Path, cfg: ImageFoldersPreprocessConfig):
    """({split: (x, y)}, the description) of what preprocess prepares of `raw`."""
    found = images.prepare(raw, raw.parent / "prepared", cfg, "preprocess.pics")
    return {split: found.head(split, 10**6) for split in found.splits}, found


def png(img: np.ndarray | Image.Image, fmt: str = "PNG") -> bytes:
    pil = img if isinstance(img, Image.Image) else Image.fromarray(img)
    buf = io.BytesIO()
    pil.save(buf, format=fmt)
    return buf.getvalue()


def flat(shade: int, size=(8, 8)) -> bytes:
    return png(np.full(size[::-1], shade, np.uint8))


def members(splits=("train", "test"), per_class=(3, 2), top="") -> dict[str, bytes | None]:
    """{path: picture} of a dataset of the SHADES classes; a path ending in / is a folder."""
    out: dict[str, bytes | None] = {}
    for split, count in zip(splits, per_class):
        for label, shade in SHADES.items():
            for i in range(count):
                out[f"{top}{split}/{label}/{i}.png"] = flat(shade + i)
    return out


def write(dest: Path, files: dict[str, bytes | None]) -> Path:
    """`files` as a .zip, a .tar.gz or a folder, by `dest`'s name; None: an (empty) folder."""
    if dest.name.endswith(".zip"):
        with zipfile.ZipFile(dest, "w") as zf:
            for name, data in files.items():
                zf.writestr(name, b"" if data is None else data)
    elif dest.name.endswith(".tar.gz"):
        with tarfile.open(dest, "w:gz") as tf:
            for name, data in files.items():
                info = tarfile.TarInfo(name.rstrip("/"))
                if data is None:
                    info.type = tarfile.DIRTYPE
                    tf.addfile(info)
                else:
                    info.size = len(data)
                    tf.addfile(info, io.BytesIO(data))
    else:
        for name, data in files.items():
            path = dest / name
            if data is None:
                path.mkdir(parents=True, exist_ok=True)
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
    return dest


def raw_with(tmp_path: Path, files: dict, name: str = "pics.tar.gz") -> Path:
    """A download folder holding `files` packed as `name` (a folder's files when `name` is '')."""
    raw = tmp_path / "raw"
    raw.mkdir()
    write(raw / name if name else raw, files)
    return raw


def test_classes_are_the_sorted_folder_names_and_labels_match(tmp_path, cfg):
    splits, found = prepare(raw_with(tmp_path, members()), cfg)
    assert found.class_names == ["Bee", "ant", "zebra"] and found.num_classes == 3
    assert sorted(p.name for p in found.folder.iterdir() if not p.name.endswith(".bin")) == ["stats.json"]
    for x, y in splits.values():
        for label, name in enumerate(found.class_names):
            # each picture's grey level tells its folder: the label must be that folder's index
            assert set(np.unique(x[y == label]).tolist()) <= {SHADES[name] + i for i in range(3)}
    assert {k: s.samples for k, s in found.splits.items()} == {"train": 8, "val": 1, "test": 6}
    assert found.split("test").class_counts == [2, 2, 2]
    assert np.add(found.split("train").class_counts, found.split("val").class_counts).tolist() == [3, 3, 3]


def test_the_training_split_is_in_a_seeded_order_not_by_class(tmp_path, cfg):
    """A bounded shuffle buffer draws from the shards in order: a training split by class
    would give batches of one class. The order is drawn from validation_seed, the same on
    every run; validation and test keep the listing's order (by class)."""
    files = {f"{split}/{label}/{i}.png": flat(shade + i) for split, n in (("train", 20), ("test", 2))
             for label, shade in SHADES.items() for i in range(n)}  # fmt: skip
    raw = raw_with(tmp_path, files)
    written, _ = prepare(raw, cfg)
    labels = written["train"][1].tolist()
    assert labels != sorted(labels) and len(set(labels[:12])) == 3
    again = images.prepare(raw, tmp_path / "again", cfg, "preprocess.pics")
    assert again.head("train", 100)[1].tolist() == labels
    assert written["test"][1].tolist() == sorted(written["test"][1].tolist())
    assert splits.training_order(5, 7).tolist() == splits.training_order(5, 7).tolist() != list(range(5))


@pytest.mark.parametrize("names", [("train", "test"), ("training", "testing"), ("Training", "TEST")])
def test_split_folder_names(tmp_path, names):
    raw = raw_with(tmp_path, members(splits=names, per_class=(2, 1), top="top/"), "x.zip")
    _, found, classes = read_splits(raw, 8, "grey")
    assert classes == ["Bee", "ant", "zebra"]
    assert len(found["train"][1]) == 6 and len(found["test"][1]) == 3


def test_tar_zip_and_plain_folder_give_the_same_arrays(tmp_path):
    files = members()
    results = []
    for name in ["pics.tar.gz", "pics.zip", ""]:
        folder = tmp_path / (name or "folder")
        folder.mkdir()
        results.append(read_splits(raw_with(folder, files, name), 8, "grey"))
    (_, first, classes), *others = results
    assert images.source(tmp_path / "pics.tar.gz" / "raw").name == "pics.tar.gz"
    assert images.source(tmp_path / "folder" / "raw").is_dir()
    for _, found, other_classes in others:
        assert other_classes == classes
        for split in ("train", "test"):
            assert np.array_equal(found[split][0], first[split][0])
            assert np.array_equal(found[split][1], first[split][1])


def test_a_larger_non_square_picture_is_resized_bilinear(tmp_path):
    # 40 wide, 20 high: dark on the left half, light on the right
    wide = np.zeros((20, 40), np.uint8)
    wide[:, 20:] = 250
    files = members(per_class=(1, 1))
    files["train/ant/wide.png"] = png(wide)
    _, found, classes = read_splits(raw_with(tmp_path, files), 8, "grey")
    x, y = found["train"]
    assert x.shape == (4, 8, 8)
    resized = next(img for img, label in zip(x, y) if classes[label] == "ant" and img.max() > 200)
    expected = np.asarray(Image.fromarray(wide).resize((8, 8), Image.Resampling.BILINEAR))
    assert np.array_equal(resized, expected)
    assert resized[:, :3].max() < 10 and resized[:, 5:].min() > 240
    # a picture already image_size square is kept as it is
    assert images.picture(png(np.arange(64, dtype=np.uint8).reshape(8, 8)), "p", 8, "grey").tolist() == (
        np.arange(64).reshape(8, 8).tolist()
    )


def test_grey_and_rgb_shapes_and_values(tmp_path):
    files = {}
    for split in ("train", "test"):
        for label, color in (("red", (255, 0, 0)), ("blue", (0, 0, 255))):
            files[f"{split}/{label}/0.png"] = png(Image.new("RGB", (12, 12), color))
    raw = raw_with(tmp_path, files)
    _, grey, classes = read_splits(raw, 6, "grey")
    _, rgb, _ = read_splits(raw, 6, "rgb")
    assert classes == ["blue", "red"]
    assert grey["train"][0].shape == (2, 6, 6) and grey["train"][0].dtype == np.uint8
    assert rgb["train"][0].shape == (2, 6, 6, 3) and rgb["train"][0].dtype == np.uint8
    assert rgb["train"][0][1, 0, 0].tolist() == [255, 0, 0]  # red, label 1
    # ITU-R 601-2 luma: L = R * 299/1000 + G * 587/1000 + B * 114/1000
    assert grey["train"][0][:, 0, 0].tolist() == [29, 76]
    # a grey picture read as rgb: three equal channels
    assert images.picture(flat(90), "p", 8, "rgb")[0, 0].tolist() == [90, 90, 90]


def test_a_transparent_png_is_laid_on_white():
    rgba = np.zeros((8, 8, 4), np.uint8)  # black, fully transparent...
    rgba[:4, :, 3] = 255  # ...but the top half opaque
    rgba[4:6, :, 3] = 128  # and two rows half transparent
    grey = images.picture(png(Image.fromarray(rgba, "RGBA")), "p", 8, "grey")
    assert grey[:4].max() == 0 and grey[6:].min() == 255
    assert 120 <= grey[4:6].min() <= grey[4:6].max() <= 135
    rgb = images.picture(png(Image.fromarray(rgba, "RGBA")), "p", 8, "rgb")
    assert rgb[7, 0].tolist() == [255, 255, 255] and rgb[0, 0].tolist() == [0, 0, 0]
    # grey with alpha too
    la = Image.fromarray(np.stack([np.zeros((8, 8), np.uint8), np.zeros((8, 8), np.uint8)], -1), "LA")
    assert images.picture(png(la), "p", 8, "grey").min() == 255


def test_a_picture_drawn_light_on_transparency_is_laid_on_black_where_on_white_it_would_vanish():
    glyph = np.zeros((16, 16, 4), np.uint8)
    glyph[4:12, 6:10] = (255, 255, 255, 255)  # a white bar on a transparent canvas (an icon for dark panels)
    glyph[3, 6:10] = (250, 250, 250, 90)  # an antialiased edge: as light, and faint
    grounds: Counter[str] = Counter()
    grey = images.picture(png(Image.fromarray(glyph, "RGBA")), "p", 16, "grey", grounds)
    assert grey[4:12, 6:10].min() == 255 and grey[:3].max() == 0  # the bar, on black
    assert 80 <= grey[3, 6] <= 95  # its edge, laid on black too
    assert grounds == {"black": 1}  # counted
    # a dark drawing on the same canvas shows on white: laid on white, as any other
    ink = glyph.copy()
    ink[..., :3] = 0
    assert images.picture(png(Image.fromarray(ink, "RGBA")), "p", 16, "grey", grounds)[0, 0] == 255
    assert grounds == {"black": 1}  # not counted
    # a white card with a little dark ink, its corners transparent: it shows on white, kept there
    card = np.full((16, 16, 4), 255, np.uint8)
    card[0, 0, 3] = card[0, -1, 3] = 0
    card[7:9, 7:9, :3] = 0  # 4 of 256 pixels: 1.6%, over the 1% that shows
    on = images.picture(png(Image.fromarray(card, "RGBA")), "p", 16, "rgb")
    assert on[0, 0].tolist() == [255, 255, 255] and on[8, 8].tolist() == [0, 0, 0]
    # a colour drawing that is light in every channel but one shows on white
    yellow = glyph.copy()
    yellow[4:12, 6:10, 2] = 0
    assert images.picture(png(Image.fromarray(yellow, "RGBA")), "p", 16, "rgb")[0, 0].tolist() == [255, 255, 255]
    # nothing drawn at all: on white, as before
    assert images.picture(png(Image.fromarray(np.zeros((16, 16, 4), np.uint8), "RGBA")), "p", 16, "grey").min() == 255


def test_preprocess_says_how_many_pictures_it_laid_on_black(tmp_path, caplog):
    glyph = np.zeros((8, 8, 4), np.uint8)
    glyph[2:6, 3:5] = (255, 255, 255, 255)  # white on a transparent canvas
    files = members()
    files["train/ant/0.png"] = files["test/zebra/1.png"] = png(Image.fromarray(glyph, "RGBA"))
    with caplog.at_level("INFO", logger="pipeline"):
        read_splits(raw_with(tmp_path, files), 8, "grey")
    said = [r.getMessage() for r in caplog.records if "laid on black" in r.getMessage()]
    assert said == [
        f"{tmp_path / 'raw' / 'pics.tar.gz'}: of its pictures, 2 are drawn light on a transparent canvas: laid on "
        "black, where white would hide them"
    ]
    caplog.clear()
    with caplog.at_level("INFO", logger="pipeline"):
        (tmp_path / "plain").mkdir()
        read_splits(raw_with(tmp_path / "plain", members()), 8, "grey")
    assert not [r for r in caplog.records if "laid on black" in r.getMessage()]  # none: nothing said


def test_images_digest_is_stable_across_repacking(tmp_path):
    files = members()
    # the same pictures under a top folder, other split and file names, in reverse order
    renamed = {
        "top/" + name.replace("train/", "training/").replace("test/", "testing/").replace(".png", "-x.PNG"): data
        for name, data in reversed(list(files.items()))
    }
    digests = []
    for i, (name, content) in enumerate([("a.tar.gz", files), ("b.zip", renamed), ("", files)]):
        folder = tmp_path / str(i)
        folder.mkdir()
        digests.append(read_splits(raw_with(folder, content, name), 8, "grey")[0])
    assert len(set(digests)) == 1 and len(digests[0]) == 64
    # one pixel changed: another digest
    changed = dict(files)
    img = np.full((8, 8), SHADES["ant"], np.uint8)
    img[3, 3] += 1
    changed["test/ant/0.png"] = png(img)
    (tmp_path / "c").mkdir()
    other = read_splits(raw_with(tmp_path / "c", changed), 8, "grey")[0]
    assert other != digests[0]


def test_a_pinned_images_sha256_is_checked(tmp_path, cfg):
    raw = raw_with(tmp_path, members())
    digest = read_splits(raw, 8, "grey")[0]
    splits, _ = prepare(raw, dataclasses.replace(cfg, images_sha256=digest.upper()))
    assert len(splits["test"][1]) == 6
    wrong = "0" * 64
    with pytest.raises(DataError) as caught:
        images.prepare(raw, tmp_path / "pinned", dataclasses.replace(cfg, images_sha256=wrong), "preprocess.pics")
    assert not (tmp_path / "pinned").exists()
    message = str(caught.value)
    assert message.startswith(f"{raw / 'pics.tar.gz'}: ")
    assert "preprocess.pics.images_sha256" in message and wrong in message and digest in message


@pytest.mark.parametrize("name", ["pics.zip", ""])
def test_an_empty_class_folder_is_seen_in_a_zip_and_a_folder(tmp_path, name):
    # the CLI case below packs it as a tar; a class with no picture would be a class never learnt
    raw = raw_with(tmp_path, {**members(), "test/cat/": None, "train/cat/0.png": flat(9)}, name)
    with pytest.raises(DataError, match=r"test/cat/: a class folder with no PNG or JPEG picture"):
        read_splits(raw, 8, "grey")


# --------------------------------------------------------------------------- through the CLI


def write_pics_params(folder: Path) -> Path:
    """A params.yaml declaring the one dataset `pics` in every section: MNIST's sections, its
    reader `folders` (and no dvc.yaml beside it)."""
    shipped = yaml.safe_load((ROOT / "params.yaml").read_text())
    raw = {section: {"pics": datasets["mnist"]} for section, datasets in shipped.items() if section != "add"}
    raw["preprocess"]["pics"].update(reader="folders", image_size=8, images_sha256=None)
    path = folder / "params.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def good_files() -> dict[str, bytes | None]:
    return members(splits=("training", "testing"), per_class=(2, 1), top="pics/")


NOISE = png(np.random.RandomState(0).randint(0, 256, (64, 64), dtype=np.uint8))
BAD_INPUTS: dict[str, tuple[dict[str, bytes | None], str]] = {
    "empty class folder": ({"pics/training/cat/": None, "pics/testing/cat/0.png": flat(9)}, "cat/"),
    "truncated png": ({"pics/testing/ant/cut.png": NOISE[: len(NOISE) // 2]}, "pics/testing/ant/cut.png"),
    "text named .png": ({"pics/training/ant/notes.png": b"not a picture\n"}, "pics/training/ant/notes.png"),
    "class only in train": ({"pics/training/cat/0.png": flat(9)}, "'cat'"),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_images_fail_with_one_error_line_and_no_output(tmp_path, case):
    extra, named = BAD_INPUTS[case]
    raw = raw_with(tmp_path, {**good_files(), **extra}, "pics.tar.gz")
    params = write_pics_params(tmp_path)
    out = tmp_path / "prepared"
    done = run_pipeline("preprocess", "pics", "--raw", raw, "--out", out, "--params", params, cwd=tmp_path)
    lines = done.stderr.splitlines()
    assert done.returncode == 1, done.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert str(raw / "pics.tar.gz") in lines[0] and named in lines[0], lines[0]
    assert "Traceback" not in done.stderr and "unexpected" not in done.stderr
    assert not out.exists()


def test_the_good_archive_of_the_cli_cases_is_prepared(tmp_path):
    # the bad cases above differ from this one by their one bad member only
    raw = raw_with(tmp_path, good_files(), "pics.tar.gz")
    params = write_pics_params(tmp_path)
    preprocess = load_params(params, "pics").preprocess
    assert isinstance(preprocess, ImageFoldersPreprocessConfig) and preprocess.reader == "folders"
    _, found = prepare(raw, preprocess)
    assert found.samples("test") == 3 and found.class_names == ["Bee", "ant", "zebra"]


# --------------------------------------------------------------------------- what users really have

FINDER = {
    ".DS_Store": b"\0\0\0\1Bud1",
    "train/.DS_Store": b"\0\0\0\1Bud1",  # beside the class folders: depth 1
    "train/ant/.DS_Store": b"\0\0\0\1Bud1",
    "__MACOSX/": None,
    "__MACOSX/train/ant/._0.png": b"\0\5\26\7 resource fork",
    "test/Thumbs.db": b"\xd0\xcf\x11\xe0",
    "test/ant/desktop.ini": b"[.ShellClassInfo]\r\n",
}


@pytest.mark.parametrize("name", ["pics.zip", "pics.tar.gz", ""])
def test_what_an_operating_system_leaves_is_passed_over_and_counted(tmp_path, name, caplog):
    raw = raw_with(tmp_path, {**members(), **FINDER}, name)
    if not name:
        (raw / "train" / ".thumbnails").mkdir()
        (raw / "train" / ".thumbnails" / "ant.png").write_bytes(b"not even a picture")
    with caplog.at_level("INFO", logger="pipeline"):
        _, found, classes = read_splits(raw, 8, "grey")
    assert classes == ["Bee", "ant", "zebra"]
    assert len(found["train"][1]) == 9 and len(found["test"][1]) == 6
    (line,) = [m for m in caplog.messages if "passed over" in m]
    count, kinds = (7, ".DS_Store, .thumbnails/, Thumbs.db, __MACOSX/, desktop.ini") if not name else (6, "")
    kinds = kinds or ".DS_Store, Thumbs.db, __MACOSX/, desktop.ini"
    assert line.endswith(f": passed over {count} files an operating system leaves ({kinds}): not samples"), line
    # the same pictures as without them
    (tmp_path / "plain").mkdir()
    plain = read_splits(raw_with(tmp_path / "plain", members(), name), 8, "grey")[1]
    assert all(np.array_equal(found[s][0], plain[s][0]) for s in ("train", "test"))


def test_macos_resource_fork_beside_the_archive_is_not_a_second_archive(tmp_path, caplog):
    raw = raw_with(tmp_path, members(), "pics.zip")
    (raw / "._pics.zip").write_bytes(b"\0\5\26\7")
    with caplog.at_level("INFO", logger="pipeline"):
        read_splits(raw, 8, "grey")
    assert images.source(raw) == raw / "pics.zip"
    assert any("passed over 1 file an operating system leaves (._*)" in m for m in caplog.messages)


def test_a_link_loop_in_the_archive_is_named_as_its_member(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    with tarfile.open(raw / "pics.tar.gz", "w:gz") as tf:
        for name, data in members().items():
            info = tarfile.TarInfo(name)
            info.size = len(data or b"")
            tf.addfile(info, io.BytesIO(data or b""))
        for name, target in (("train/ant/a.png", "b.png"), ("train/ant/b.png", "a.png")):
            link = tarfile.TarInfo(name)
            link.type, link.linkname = tarfile.SYMTYPE, target
            tf.addfile(link)
    with pytest.raises(DataError) as caught:
        read_splits(raw, 8, "grey")
    assert str(caught.value).startswith(
        f"{raw / 'pics.tar.gz'}: train/ant/a.png: a link loop (train/ant/a.png -> train/ant/b.png -> train/ant/a.png)"
    )


@pytest.mark.parametrize("name", ["pics.zip", ""])
def test_a_picture_file_larger_than_the_cap_is_refused_unread(tmp_path, name, monkeypatch):
    monkeypatch.setattr(images, "MAX_FILE_BYTES", 4096)
    big = png(np.random.RandomState(1).randint(0, 256, (80, 80), dtype=np.uint8))
    assert len(big) > 4096
    raw = raw_with(tmp_path, {**members(), "train/ant/big.png": big}, name)
    with pytest.raises(DataError) as caught:
        read_splits(raw, 8, "grey")
    assert str(caught.value).endswith("train/ant/big.png: expected a file of at most 4,096 bytes, got more")


def test_the_cap_holds_the_largest_picture_allowed():
    # a MAX_SIDE square of 16-bit RGBA stored uncompressed, a filter byte a row
    assert images.MAX_FILE_BYTES >= images.MAX_PIXELS * 8 + images.MAX_SIDE


def png16(pixels: np.ndarray, color_type: int, trns: bytes = b"", bit_depth: int = 16) -> bytes:
    """A PNG written byte by byte (Pillow writes no 16-bit colour): `pixels` uint16 [h, w(, c)],
    colour type 0 (grey), 2 (RGB), 4 (grey, alpha) or 6 (RGBA); `trns`, a tRNS chunk's data."""
    height, width = pixels.shape[:2]
    raw = b"".join(b"\0" + pixels[y].astype(">u2").tobytes() for y in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, bit_depth, color_type, 0, 0, 0)
    extra = chunk(b"tRNS", trns) if trns else b""
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + extra + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
    )


# 16-bit values and what TensorFlow's decode_png (Keras' reader) makes of them: value >> 8
DEEP = np.array([[0, 255, 256, 65535], [1000, 32768, 65280, 40000]], np.uint16)
DEEP_AS_KERAS = [[0, 0, 1, 255], [3, 128, 255, 156]]


def test_a_16_bit_grey_png_is_scaled_to_8_bits_as_keras_reads_it_not_clipped():
    assert images.picture(png16(np.tile(DEEP, (2, 1)), 0), "p", 4, "grey").tolist() == DEEP_AS_KERAS * 2
    rgb = images.picture(png16(np.tile(DEEP, (2, 1)), 0), "p", 4, "rgb")
    assert rgb[..., 0].tolist() == rgb[..., 2].tolist() == DEEP_AS_KERAS * 2
    # a tRNS colour of a 16-bit grey picture: that value transparent, laid on white
    square = np.tile(DEEP, (2, 1))
    seen = images.picture(png16(square, 0, trns=struct.pack(">H", 1000)), "p", 4, "grey")
    assert seen[1, 0] == 255 and seen[0].tolist() == [0, 0, 1, 255]


def test_16_bit_rgb_and_rgba_pngs_keep_the_high_byte():
    square = np.tile(DEEP, (2, 1))
    rgb = np.stack([square, square // 2, np.full_like(square, 65535)], -1)
    got = images.picture(png16(rgb, 2), "p", 4, "rgb")
    assert got[..., 0].tolist() == DEEP_AS_KERAS * 2
    assert got[..., 1].tolist() == (np.tile(DEEP, (2, 1)) // 2 >> 8).tolist()
    assert got[..., 2].min() == 255
    opaque = np.concatenate([rgb, np.full_like(square, 65535)[..., None]], -1)
    assert np.array_equal(images.picture(png16(opaque, 6), "p", 4, "rgb"), got)
    grey_alpha = np.stack([square, np.full_like(square, 65535)], -1)
    assert images.picture(png16(grey_alpha, 4), "p", 4, "grey").tolist() == DEEP_AS_KERAS * 2


def test_every_mode_a_png_or_jpeg_decodes_to_is_read():
    shades = np.array([[0, 60], [120, 250]], np.uint8)
    palette = Image.fromarray(shades, "L").convert("P")
    assert images.picture(png(palette), "p", 2, "grey").tolist() == shades.tolist()
    # a palette with a transparent entry: that entry on white
    see_through = palette.copy()
    see_through.info["transparency"] = palette.getpixel((0, 0))
    buf = io.BytesIO()
    see_through.save(buf, format="PNG", transparency=palette.getpixel((0, 0)))
    assert images.picture(buf.getvalue(), "p", 2, "grey").tolist() == [[255, 60], [120, 250]]
    one_bit = Image.fromarray(shades > 100).convert("1")
    assert images.picture(png(one_bit), "p", 2, "grey").tolist() == [[0, 0], [255, 255]]
    cmyk = Image.new("CMYK", (2, 2), (0, 255, 255, 0))  # red ink
    assert images.picture(png(cmyk, "JPEG"), "p", 2, "rgb")[0, 0].tolist() == [255, 0, 0]
    la = Image.merge("LA", (Image.fromarray(shades), Image.fromarray(np.full((2, 2), 255, np.uint8))))
    assert images.picture(png(la), "p", 2, "grey").tolist() == shades.tolist()


@pytest.mark.parametrize("mode", ["F", "I", "HSV"])
def test_a_mode_no_png_or_jpeg_is_read_as_is_refused_naming_it(mode):
    img = Image.new(mode, (2, 2), (1, 2, 3) if mode == "HSV" else 70000)
    with pytest.raises(DataError) as caught:
        images.eight_bit(img, "p.png")
    assert str(caught.value).startswith("p.png: a ") and f"mode {mode}" in str(caught.value)


def test_the_served_digit_goes_through_the_same_conversion():
    from pipeline.data import mnist

    digit = np.zeros((6, 6), np.uint16)
    digit[2:4, 2:4] = 40000  # light ink on a dark ground, in 16 bits
    got = mnist.read_digit(png16(digit, 0), "row 0: image", 6)
    assert got[2, 2] == 40000 >> 8 and got[0, 0] == 0  # not clipped to white, not inverted


def bomb(side: int) -> bytes:
    """A PNG whose header claims side x side pixels, with a pixel of data."""
    data = png16(np.zeros((1, 1), np.uint16), 0)
    data = data[:16] + struct.pack(">II", side, side) + data[24:]
    return data[:29] + struct.pack(">I", zlib.crc32(data[12:29])) + data[33:]


@pytest.mark.parametrize("side", [10_000, 20_000])  # past Pillow's warning limit, past its error limit
def test_a_decompression_bomb_is_one_error_and_no_warning(side, capsys):
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(DataError) as error:
            images.picture(bomb(side), "big.png", 8, "grey")
    assert str(error.value) == f"big.png: a {side}x{side} image; expected at most 4096x4096 pixels"
    assert caught == [] and capsys.readouterr().err == ""


def test_what_users_really_have_through_the_cli(tmp_path):
    # a Finder zip (.DS_Store beside the class folders, __MACOSX/) holding a 16-bit PNG: prepared
    files = {**good_files(), "pics/training/.DS_Store": b"\0\0\0\1Bud1", "__MACOSX/pics/._training": b"\0"}
    files["pics/training/ant/deep.png"] = png16(np.full((8, 8), 40000, np.uint16), 0)
    raw = raw_with(tmp_path, files, "pics.zip")
    params = write_pics_params(tmp_path)
    out = tmp_path / "prepared"
    done = run_pipeline("preprocess", "pics", "--raw", raw, "--out", out, "--params", params, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "passed over 2 files an operating system leaves (.DS_Store, __MACOSX/): not samples" in done.stderr
    assert "warning" not in done.stderr.lower() and "error" not in done.stderr
    found = prepared.read(out)
    x = np.concatenate([found.head(s, 100)[0] for s in ("train", "val")])
    assert (x == 40000 >> 8).all(axis=(1, 2)).sum() == 1  # the 16-bit picture, scaled as Keras does
    # a decompression bomb: one error line, Pillow's warning not beside it
    (tmp_path / "bomb").mkdir()
    raw = raw_with(tmp_path / "bomb", {**good_files(), "pics/testing/ant/big.png": bomb(10_000)}, "pics.zip")
    out = tmp_path / "bomb" / "prepared"
    done = run_pipeline("preprocess", "pics", "--raw", raw, "--out", out, "--params", params, cwd=tmp_path)
    assert done.returncode == 1 and not out.exists()
    assert done.stderr.splitlines() == [
        f"error: {raw / 'pics.zip'}: pics/testing/ant/big.png: a 10000x10000 image; expected at most 4096x4096 pixels"
    ]


def test_class_folders_equal_as_numbers_are_distinct_classes_sorted_by_name(tmp_path):
    files = {
        f"{split}/{label}/0.png": flat(i * 10)
        for split in ("train", "test")
        for i, label in enumerate("1 01 10 2".split())
    }
    _, found, classes = read_splits(raw_with(tmp_path, files, "pics.zip"), 8, "grey")
    assert classes == ["01", "1", "10", "2"]  # as Keras' image_dataset_from_directory: by name
    assert found["train"][0][:, 0, 0].tolist() == [10, 0, 20, 30]


def test_a_stratified_hold_out_validates_on_a_rare_class_and_keeps_the_training_order(tmp_path, cfg):
    """ant and zebra have 20 training pictures each, Bee 3: a random 10% hold-out leaves Bee
    out of validation (this seed); class by class it holds out 1 Bee (and 2 of each other),
    keeps 2 for training, and the training split is still written in a seeded order, not by
    class. No picture is dropped; the test split is the test folder's."""
    counts = {"ant": 20, "zebra": 20, "Bee": 3}
    files = {f"train/{label}/{i}.png": flat(SHADES[label] + i % 3) for label, n in counts.items() for i in range(n)}
    files.update({f"test/{label}/0.png": flat(SHADES[label]) for label in counts})
    raw = raw_with(tmp_path, files)
    drawn = images.prepare(raw, tmp_path / "random", cfg, "preprocess.pics")
    assert drawn.class_names == ["Bee", "ant", "zebra"] and drawn.split("val").class_counts[0] == 0
    stratified = dataclasses.replace(cfg, stratify=True)
    found = images.prepare(raw, tmp_path / "stratified", stratified, "preprocess.pics")
    assert found.split("val").class_counts == [1, 2, 2] and found.split("train").class_counts == [2, 18, 18]
    assert found.split("test").class_counts == [1, 1, 1]
    labels = found.head("train", 100)[1].tolist()
    assert labels != sorted(labels) and len(set(labels[:10])) >= 2  # the seeded order, not by class
    again = images.prepare(raw, tmp_path / "again", stratified, "preprocess.pics")
    for split in ("train", "val", "test"):
        assert again.split(split).shards == found.split(split).shards  # the same bytes: seeded
    assert found.class_weights("train") == pytest.approx([38 / (3 * 2), 38 / (3 * 18), 38 / (3 * 18)])
