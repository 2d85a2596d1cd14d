"""Real datasets found on a Debian machine, written in `pipeline add`'s input formats, to judge
its defaults on data no one in the project made; and the classical yardsticks on them.

Every set is made deterministically (sorted listings, seed 0) from files that Debian packages
install; nothing is downloaded at run time. Pictures are written as PNG image folders
(`folder/{train,test}/<class>/<file>.png`, the test split fixed here); texts as one CSV file
`folder/<name>.csv` with a header `text,label` (the pipeline splits it itself). Training pictures
are capped at 5,000 and text rows at 12,500 (class by class, in proportion, each class keeping
at least 50 rows), so that a training run stays short.

Pictures:

- `sk_digits`: scikit-learn's bundled digits (1,797 of 8x8, grey, 10 classes), split 80/20
  class by class (random_state 0), as benchmarks/new_datasets.py writes them.
- `font_digits`: the digits 0-9 drawn from every font of the machine that has them (TrueType and
  OpenType of fonts-* packages, TeX Gyre and Latin Modern), 28x28 grey, each glyph fitted in a
  20x20 box and centred (as MNIST's); a font whose glyphs are nearly those of one kept before
  (clones such as TeX Gyre of URW's, Arimo of Liberation's; Latin Modern's optical sizes) left
  out; the test split is whole family groups (the family's first two words: all of Noto Sans in
  one split), about a fifth of the fonts, unseen in training.
- `font_letters`: the same for the lowercase letters a-z (26 classes), 32x32 grey, 24x24 box.
- `font_scripts`: letters of 14 writing systems (latin, greek, cyrillic, armenian, georgian,
  hebrew, arabic, devanagari, bengali, tamil, thai, khmer, ethiopic, cherokee) from every font
  that covers them (mostly Noto, DejaVu, FreeFont), 32x32 grey; the class is the script; the
  test split holds a fifth of each script's characters, unseen in training; 400 a class at most.
  Look-alikes across scripts (Latin A, Greek Alpha, Cyrillic A) are real ambiguities kept.
- `emoji_groups`: the emoji of Noto Color Emoji (fonts-noto-color-emoji), 64x64 RGBA, labelled
  by their Unicode group (emoji-test.txt of unicode-data: smileys-emotion, people-body, ...,
  flags; skin-tone variants and components left out); stratified 80/20 split.
- `emoji_subgroups`: the same emoji labelled by their Unicode subgroup (face-smiling,
  animal-mammal, transport-ground, ...; 39 subgroups of 16 emoji or more, 13 to 200 training
  pictures); stratified 80/20 split.
- `emoji_skin_tones`: the people and hands of Noto Color Emoji in one of the five skin tones,
  64x64 RGBA, labelled by the tone; the test split is whole emoji (all five tones of a fifth of
  them), unseen in training.
- `icon_contexts`: 48x48 colour icons (RGBA) of the gnome, mate, oxygen, Tango (its SVGs drawn
  by rsvg-convert) and elementary-xfce icon themes, labelled by their theme folder (actions,
  apps, devices, mimetypes, places, status, ...); symbolic icons left out, identical pictures
  kept once; the test split is the elementary-xfce theme, a style unseen in training; a class
  with under 20 training or 5 test pictures left out (emotes).
- `cards_suit` and `cards_rank`: the 52 cards of every playing-card deck of aisleriot
  (gnome-cards-data) and KDE (kdegames-card-data-kf5), drawn from their SVG at 96 px high
  (width as the deck has it, RGBA) by librsvg through Debian's python3-gi; the class is the
  suit (4) or the rank (13); the test split is whole decks (a fifth), variants of one deck
  (4 colours, bitmap, a deck in both packages) kept on one side. A deck with a card librsvg
  does not draw as an upright card of the deck's size is left out (on Debian 12: aisleriot's
  dondorf and swiss-xvii, KDE's future and xskat german; 41 decks kept).
- `mahjong_suits`: the 42 tile faces of the mahjong tilesets of KDE (kdegames-mahjongg-data-kf5:
  classic, default, egypt, traditional; each face drawn by librsvg at 64 px high, without the
  tile's body), gnome-mahjongg (smooth, and postmodern drawn by rsvg-convert) and xmahjongg
  (Dorothy Robinson's two sheets, one family), fitted in 64x64 RGBA, labelled by suit (dots,
  bamboo, characters, winds, dragons, bonus: flowers and seasons); a blank face left out, and the
  tilesets whose faces draw no suit's sign (KDE's alphabet, gnome-mahjongg's Kangxi radicals) or
  draw it white for the body (KDE's jade); the test split is whole tilesets, unseen in training.

Texts:

- `debian_sections`: Debian's short package descriptions (one line; apt's lists of the main
  archive, read with apt-helper) labelled by the package's section, the 12 most common ones.
- `debian_groups`: the long descriptions (a paragraph or more; apt's Translation-en lists, which
  `apt-get update -o Acquire::Languages=en` fetches) of one binary package per source package,
  labelled by a coarse group of its section (libraries, language_modules, development,
  documentation, desktop_media, network, system, science, text).
- `man_sections`: the NAME lines of the manual pages of Debian packages (`lexgrog`, man-db's
  whatis parser; pages of packages that apt's lists do not know, such as a cloud vendor's
  thousands, left out), labelled by the section; sections of under 50 lines (4, 6) left out;
  which pages there are depends on what is installed.
- `fortune_topics`: English fortunes (fortunes, fortunes-min), labelled by their file (art,
  computers, food, law, linux, love, science, startrek, ...; 39 files of 50 or more).
- `fortune_languages`: fortunes in English, German, Spanish, Italian, Russian, Polish and
  Czech (fortunes-de, -es, -it, -ru, -pl, -cs), labelled by their language.
- `wordnet_nouns`: WordNet's noun definitions (wordnet-base), labelled by their lexicographer
  file (animal, artifact, food, person, plant, ...; 500 a class at most).
- `bible_verses`: the verses of the King James Bible (bible-kjv), labelled by the division of
  their book (law, history, wisdom, major/minor prophets, gospels, acts_epistles, revelation).
- `docstrings`: the first paragraph of the docstrings of the functions and classes of 14
  Python libraries of the project's environment (numpy, scipy, pandas, scikit-learn, matplotlib,
  networkx, SQLAlchemy, fontTools, Celery, Dulwich, Hypothesis, Pillow, MLflow, DVC; their tests
  and vendored copies left out), labelled by the library; which docstrings there are depends on
  the versions installed.

The Debian packages, all in main (`apt-get update` first):

    apt-get install --no-install-recommends fonts-dejavu-core fonts-dejavu-extra fonts-liberation \\
      fonts-liberation2 fonts-freefont-ttf fonts-noto-core fonts-urw-base35 fonts-croscore \\
      fonts-crosextra-carlito fonts-crosextra-caladea fonts-lato fonts-open-sans \\
      fonts-roboto-unhinted fonts-cantarell fonts-linuxlibertine fonts-texgyre fonts-lmodern \\
      fonts-ebgaramond fonts-inconsolata fonts-hack fonts-firacode fonts-noto-mono \\
      fonts-noto-color-emoji unicode-data gnome-icon-theme mate-icon-theme oxygen-icon-theme \\
      tango-icon-theme elementary-xfce-icon-theme librsvg2-bin gnome-cards-data \\
      kdegames-card-data-kf5 python3-gi python3-gi-cairo gir1.2-rsvg-2.0 manpages manpages-dev \\
      fortunes fortunes-min fortunes-de fortunes-es fortunes-it fortunes-ru fortunes-pl \\
      fortunes-cs wordnet-base bible-kjv bible-kjv-text
    apt-get update -o Acquire::Languages=en     # debian_groups' long descriptions

and scikit-learn in the project's environment (`pip install scikit-learn`); fontTools (the font
sets) comes with matplotlib. A set whose source is missing says so (`available`).

    python benchmarks/real_datasets.py list
    python benchmarks/real_datasets.py make NAME DIR
    python benchmarks/real_datasets.py check NAME DIR [--side N]   # make, describe, yardsticks

Nothing here imports TensorFlow; scikit-learn, Pillow, numpy and fontTools are imported inside
the functions that use them.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import importlib
import io
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

SEED = 0
TEST_SHARE = 0.2
MAX_TRAIN_PICTURES = 5000
MAX_TEXT_ROWS = 12_500
MIN_CLASS_ROWS = 50  # a text class keeps at least this many rows when the set is capped
PICTURE_SUFFIXES = (".png", ".jpg", ".jpeg")
# the pipeline's word filters (pipeline/data/texts.py): what separates words besides whitespace
WORD_FILTERS = '!"#$%&()*+,-./:;<=>?@[\\]^_`{|}~\t\n'
APT_LISTS = Path("/var/lib/apt/lists")
APT_HELPER = Path("/usr/lib/apt/apt-helper")
DPKG_INFO = Path("/var/lib/dpkg/info")
SYSTEM_PYTHON = Path("/usr/bin/python3")


def _always() -> Optional[str]:
    """No check beyond the set's paths."""
    return None


@dataclass(frozen=True)
class RealSet:
    """A real dataset: how to make it, and what it needs."""

    name: str  # short, [a-z0-9_], usable as a dataset name
    kind: str  # "image_folders" or "labelled_texts"
    title: str  # one line: what it is, from which package/source
    needs: tuple[str, ...]  # Debian packages (apt) it reads, for the docs; () if none
    make: Callable[[Path], dict]  # writes the set under the folder: {"train": n, "test": n} or {"rows": n}
    size: str = ""  # what make() gave on a Debian 12 machine, for `list`
    paths: tuple[str, ...] = ()  # files or folders it reads: all must exist
    probe: Callable[[], Optional[str]] = _always  # a further check: None, or why the set cannot be made


# --------------------------------------------------------------------------- shared helpers


def _safe(name: str) -> str:
    """A class folder's or file's name: letters, digits, '_' and '-' only."""
    return re.sub(r"[^A-Za-z0-9_-]+", "_", name).strip("_") or "x"


def _stratified_test(keys: Iterable[tuple[str, str]], share: float = TEST_SHARE, seed: int = SEED) -> set[str]:
    """The test keys of a seeded split class by class: `share` of each class's (key, label)
    pairs, at least one, drawn from the sorted keys."""
    rng = random.Random(seed)
    by_class: dict[str, list[str]] = {}
    for key, label in sorted(keys):
        by_class.setdefault(label, []).append(key)
    test: set[str] = set()
    for label in sorted(by_class):
        members = by_class[label]
        rng.shuffle(members)
        test.update(members[: max(1, round(len(members) * share))])
    return test


def _group_test(sizes: dict[str, int], share: float = TEST_SHARE, seed: int = SEED) -> set[str]:
    """Whole groups (font families, decks, ...) for the test split: taken in a seeded order until
    they hold `share` of the samples, a group that would overshoot by half passed over."""
    order = sorted(sizes)
    random.Random(seed).shuffle(order)
    total, held, test = sum(sizes.values()), 0, set()
    for group in order:
        if held >= share * total:
            break
        if held and held + sizes[group] > 1.5 * share * total:
            continue
        test.add(group)
        held += sizes[group]
    return test


@dataclass
class _Picture:
    """One picture of a set, before it is written."""

    split: str  # "train" or "test"
    label: str
    stem: str  # the file's name without .png, unique in its class folder
    image: Any  # a PIL image


def _cap_train(pictures: list[_Picture], limit: int = MAX_TRAIN_PICTURES, seed: int = SEED) -> list[_Picture]:
    """At most `limit` training pictures, each class cut in proportion (seeded)."""
    train = [p for p in pictures if p.split == "train"]
    if len(train) <= limit:
        return pictures
    rng = random.Random(seed)
    by_class: dict[str, list[_Picture]] = {}
    for p in train:
        by_class.setdefault(p.label, []).append(p)
    kept: set[int] = set()
    for label in sorted(by_class):
        members = sorted(by_class[label], key=lambda p: p.stem)
        rng.shuffle(members)
        kept.update(id(p) for p in members[: max(10, len(members) * limit // len(train))])
    return [p for p in pictures if p.split == "test" or id(p) in kept]


def _write_pictures(folder: Path, pictures: list[_Picture]) -> dict[str, int]:
    """The pictures as folder/<split>/<class>/<stem>.png; the count of each split."""
    counts: Counter[str] = Counter()
    used: set[tuple[str, str, str]] = set()
    for p in pictures:
        stem, n = _safe(p.stem), 1
        while (p.split, p.label, stem) in used:  # two stems the same once made safe
            n += 1
            stem = f"{_safe(p.stem)}_{n}"
        used.add((p.split, p.label, stem))
        path = folder / p.split / _safe(p.label) / f"{stem}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        p.image.save(path, format="PNG")
        counts[p.split] += 1
    return {"train": counts["train"], "test": counts["test"]}


def _pixels_key(image) -> str:
    """A digest of a picture's mode, size and pixels: identical pictures share it."""
    return hashlib.sha1(f"{image.mode}{image.size}".encode() + image.tobytes()).hexdigest()


def _fit(image, side: int, box: int, background: int | tuple[int, ...]):
    """A picture cropped to its ink (the non-background pixels), scaled to fit a `box` square
    (aspect kept, Lanczos) and centred on a `side` square of the background."""
    from PIL import Image

    bbox = image.getbbox()  # of non-zero pixels: the caller draws ink on zero
    if bbox is None:
        return None
    ink = image.crop(bbox)
    scale = box / max(ink.size)
    ink = ink.resize((max(1, round(ink.width * scale)), max(1, round(ink.height * scale))), Image.Resampling.LANCZOS)
    out = Image.new(image.mode, (side, side), background)
    out.paste(ink, ((side - ink.width) // 2, (side - ink.height) // 2))
    return out


def _cap_rows(rows: list[tuple[str, str]], limit: int = MAX_TEXT_ROWS, seed: int = SEED) -> list[tuple[str, str]]:
    """At most about `limit` rows, each class cut in proportion but kept to MIN_CLASS_ROWS; in a
    seeded order."""
    rng = random.Random(seed)
    rows = sorted(rows)
    if len(rows) > limit:
        by_class: dict[str, list[tuple[str, str]]] = {}
        for row in rows:
            by_class.setdefault(row[1], []).append(row)
        kept = []
        for label in sorted(by_class):
            members = by_class[label]
            rng.shuffle(members)
            kept += members[: max(min(len(members), MIN_CLASS_ROWS), len(members) * limit // len(rows))]
        rows = sorted(kept)
    rng.shuffle(rows)
    return rows


def _clean_rows(rows: Iterable[tuple[str, str]], min_rows: int = MIN_CLASS_ROWS) -> list[tuple[str, str]]:
    """Rows with their whitespace collapsed, each text once (a text seen under two labels
    dropped), and only the classes with at least `min_rows` rows."""
    labels: dict[str, set[str]] = {}
    for text, label in rows:
        text = " ".join(text.split())
        if text:
            labels.setdefault(text, set()).add(label)
    unique = [(text, next(iter(ls))) for text, ls in labels.items() if len(ls) == 1]
    counts = Counter(label for _, label in unique)
    return sorted((text, label) for text, label in unique if counts[label] >= min_rows)


def _write_rows(folder: Path, name: str, rows: list[tuple[str, str]]) -> dict[str, int]:
    """The rows as folder/<name>.csv (header text,label, UTF-8)."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"{name}.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["text", "label"])
        writer.writerows(rows)
    return {"rows": len(rows)}


def text_rows(folder: Path) -> tuple[list[str], list[str]]:
    """The texts and labels of a text set's CSV file (the one *.csv in the folder)."""
    (path,) = sorted(folder.glob("*.csv"))
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    return [r["text"] for r in rows], [r["label"] for r in rows]


def split_rows(texts: list, labels: list[str], share: float = TEST_SHARE, seed: int = SEED):
    """A stratified, seeded split of a text set's rows (scikit-learn's train_test_split):
    train_texts, train_labels, test_texts, test_labels."""
    from sklearn.model_selection import train_test_split

    x_train, x_test, y_train, y_test = train_test_split(
        texts, labels, test_size=share, stratify=labels, random_state=seed
    )
    return x_train, y_train, x_test, y_test


# --------------------------------------------------------------------------- sk_digits


def make_sk_digits(folder: Path) -> dict[str, int]:
    """scikit-learn's digits: 8x8 grey, values 0-16 scaled to 0-255, stratified 80/20 (random_state 0)."""
    import numpy as np
    from PIL import Image
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    pixels = np.rint(digits.images * 255 / 16).astype(np.uint8)
    indices = np.arange(len(pixels))
    train, test = train_test_split(indices, test_size=0.2, stratify=digits.target, random_state=0)
    pictures = [
        _Picture(split, str(digits.target[i]), f"{i:04d}", Image.fromarray(pixels[i], mode="L"))
        for split, chosen in (("train", train), ("test", test))
        for i in chosen
    ]
    return _write_pictures(folder, pictures)


def _import_probe(module: str, install: str) -> Callable[[], Optional[str]]:
    """A probe of whether `module` imports: None, or the command that installs it."""

    def probe() -> Optional[str]:
        try:
            importlib.import_module(module)
        except ImportError:
            return install
        return None

    return probe


_sklearn_probe = _import_probe("sklearn", "pip install scikit-learn")


# --------------------------------------------------------------------------- fonts

FONT_DIRS = ("/usr/share/fonts", "/usr/share/texmf/fonts/opentype", "/usr/share/texlive/texmf-dist/fonts/opentype")
# fonts whose letters are not letters: symbols, dingbats, maths, music, emoji, keycaps,
# decorative initials and small capitals
# a file of fonts-noto-core, fonts-freefont-ttf and fonts-liberation: the sets' main sources
FONT_PROBES = (
    "/usr/share/fonts/truetype/noto/NotoSans-Regular.ttf",
    "/usr/share/fonts/truetype/freefont/FreeSerif.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
)
FONT_SKIP = re.compile(r"emoji|symbol|dingbat|d050000l|math|music|initials|keyboard|caps\b|awesome", re.I)
STYLE_WORDS = {
    "regular", "book", "bold", "italic", "oblique", "light", "extralight", "thin", "medium", "semibold",
    "demi", "extrabold", "heavy", "black", "condensed", "cond", "cn", "narrow", "display", "slanted",
    "unslanted", "ui",
}  # fmt: skip
NEAR_SAME_FONT = 0.025  # mean absolute difference of two fonts' glyphs (0-1) below which one is dropped


@dataclass(frozen=True)
class _Font:
    """A font file, its family and the characters its cmap has."""

    path: Path
    family: str
    chars: frozenset[int]


def _fonts() -> list[_Font]:
    """Every TrueType and OpenType font of FONT_DIRS but FONT_SKIP's, sorted by path (symlinks
    resolved, each file once)."""
    from fontTools.ttLib import TTFont

    paths = sorted(
        {
            p.resolve()
            for d in FONT_DIRS
            if Path(d).is_dir()
            for p in Path(d).rglob("*")
            if p.suffix.lower() in (".ttf", ".otf") and p.is_file()
        }
    )
    fonts = []
    for path in paths:
        try:
            with TTFont(path, lazy=True, fontNumber=0) as font:
                cmap = font.getBestCmap() or {}
                names = font["name"]
                family = names.getDebugName(16) or names.getDebugName(1) or path.stem
        except Exception:  # a file fontTools cannot read is no font of ours
            continue
        if not FONT_SKIP.search(family) and not FONT_SKIP.search(path.name):
            fonts.append(_Font(path, family, frozenset(cmap)))
    return fonts


def _family_group(family: str) -> str:
    """A family's group for the split: its first two words once the style words are gone
    ("Noto Sans Display" and "Noto Sans Arabic" -> "noto sans")."""
    words = [w for w in re.split(r"[^a-z0-9]+", family.lower()) if w and w not in STYLE_WORDS]
    return " ".join(words[:2]) or family.lower()


def _glyph(font, char: str, side: int, box: int):
    """One character of a PIL font, black on a white `side` square, fitted in a `box` square."""
    from PIL import Image, ImageDraw, ImageOps

    left, top, right, bottom = font.getbbox(char)
    if right <= left or bottom <= top:
        return None
    canvas = Image.new("L", (right - left + 8, bottom - top + 8), 0)
    ImageDraw.Draw(canvas).text((4 - left, 4 - top), char, fill=255, font=font)
    fitted = _fit(canvas, side, box, 0)
    return None if fitted is None else ImageOps.invert(fitted)


def _font_glyph_set(folder: Path, chars: str, side: int, box: int) -> dict[str, int]:
    """`chars` drawn from every font that has them all, a class per character; fonts whose
    glyphs are nearly those of a font kept before dropped; whole family groups in the test split."""
    import numpy as np
    from PIL import ImageFont

    kept: list[tuple[_Font, list]] = []
    signatures: list = []
    for font in _fonts():
        if not all(ord(c) in font.chars for c in chars):
            continue
        try:
            pil_font = ImageFont.truetype(str(font.path), 64)
            glyphs = [_glyph(pil_font, c, side, box) for c in chars]
        except OSError:
            continue
        if any(g is None for g in glyphs):
            continue
        signature = np.concatenate([np.asarray(g, dtype=np.float32).ravel() / 255 for g in glyphs])
        if signatures and float(np.abs(np.stack(signatures) - signature).mean(axis=1).min()) < NEAR_SAME_FONT:
            continue
        signatures.append(signature)
        kept.append((font, glyphs))
    groups = Counter(_family_group(font.family) for font, _ in kept)
    test = _group_test(dict(groups))
    pictures = [
        _Picture(
            "test" if _family_group(font.family) in test else "train",
            char,
            f"{i:03d}_{_safe(font.path.stem)}",
            glyph,
        )
        for i, (font, glyphs) in enumerate(kept)
        for char, glyph in zip(chars, glyphs)
    ]
    return _write_pictures(folder, _cap_train(pictures))


def make_font_digits(folder: Path) -> dict[str, int]:
    """The digits of every font, 28x28 grey in a 20x20 box (as MNIST's); test: unseen families."""
    return _font_glyph_set(folder, "0123456789", 28, 20)


def make_font_letters(folder: Path) -> dict[str, int]:
    """The lowercase letters of every font, 32x32 grey in a 24x24 box; test: unseen families."""
    return _font_glyph_set(folder, "abcdefghijklmnopqrstuvwxyz", 32, 24)


SCRIPTS = {
    "latin": ((0x41, 0x5A), (0x61, 0x7A)),
    "greek": ((0x391, 0x3A9), (0x3B1, 0x3C9)),
    "cyrillic": ((0x410, 0x44F),),
    "armenian": ((0x531, 0x556), (0x561, 0x586)),
    "hebrew": ((0x5D0, 0x5EA),),
    "arabic": ((0x621, 0x64A),),
    "devanagari": ((0x904, 0x939),),
    "bengali": ((0x985, 0x9B9),),
    "tamil": ((0xB85, 0xBB9),),
    "thai": ((0xE01, 0xE2E),),
    "georgian": ((0x10D0, 0x10FA),),
    "ethiopic": ((0x1200, 0x135A),),
    "cherokee": ((0x13A0, 0x13F4),),
    "khmer": ((0x1780, 0x17B3),),
}
SCRIPT_CAP = 400  # pictures a script at most, a fifth of them in the test split


def make_font_scripts(folder: Path) -> dict[str, int]:
    """Letters of SCRIPTS from every font that has them, 32x32 grey in a 26x26 box, a class a
    script; the test split a fifth of each script's characters (unseen), 400 a class at most."""
    from PIL import ImageFont

    fonts = _fonts()
    rng = random.Random(SEED)
    pictures: list[_Picture] = []
    for script, ranges in SCRIPTS.items():
        chars = [c for lo, hi in ranges for c in range(lo, hi + 1) if any(c in f.chars for f in fonts)]
        test_chars = set(rng.sample(chars, max(1, round(len(chars) * TEST_SHARE))))
        for split, cap in (("train", SCRIPT_CAP - SCRIPT_CAP // 5), ("test", SCRIPT_CAP // 5)):
            pairs = [
                (i, c)
                for i, f in enumerate(fonts)
                for c in chars
                if (c in test_chars) == (split == "test") and c in f.chars
            ]
            rng.shuffle(pairs)
            seen: set[str] = set()
            for i, c in pairs:
                if len(seen) >= cap:
                    break
                try:
                    glyph = _glyph(ImageFont.truetype(str(fonts[i].path), 64), chr(c), 32, 26)
                except OSError:
                    continue
                if glyph is None or _pixels_key(glyph) in seen:
                    continue
                seen.add(_pixels_key(glyph))
                pictures.append(_Picture(split, script, f"u{c:05x}_{i:03d}_{_safe(fonts[i].path.stem)}", glyph))
    return _write_pictures(folder, pictures)


_fonttools_probe = _import_probe("fontTools", "pip install fonttools")  # matplotlib's dependency


# --------------------------------------------------------------------------- emoji

EMOJI_FONT = Path("/usr/share/fonts/truetype/noto/NotoColorEmoji.ttf")
EMOJI_TEST = Path("/usr/share/unicode/emoji/emoji-test.txt")
SKIN_TONES = {0x1F3FB, 0x1F3FC, 0x1F3FD, 0x1F3FE, 0x1F3FF}
# what the emoji sets need and read
EMOJI_SOURCES: dict[str, Any] = dict(
    needs=("fonts-noto-color-emoji", "unicode-data"), paths=(str(EMOJI_FONT), str(EMOJI_TEST))
)


def _qualified_emoji() -> Iterator[tuple[list[int], str, str]]:
    """(code points, group, subgroup) of each fully-qualified emoji of emoji-test.txt."""
    group = subgroup = ""
    for line in EMOJI_TEST.read_text(encoding="utf-8").splitlines():
        if line.startswith("# group:"):
            group = line.split(":", 1)[1].strip()
        elif line.startswith("# subgroup:"):
            subgroup = line.split(":", 1)[1].strip()
        elif line and not line.startswith("#") and "; fully-qualified" in line:
            yield [int(h, 16) for h in line.split(";")[0].split()], group, subgroup


def _emoji() -> Iterator[tuple[str, str, str]]:
    """(emoji, group, subgroup) of emoji-test.txt's fully-qualified emoji, without skin tones and
    components."""
    for points, group, subgroup in _qualified_emoji():
        if group != "Component" and not SKIN_TONES.intersection(points):
            yield "".join(map(chr, points)), group, subgroup


def _emoji_drawer() -> Callable[[str], Any]:
    """A function drawing an emoji with Noto Color Emoji as a 64x64 RGBA picture, or None for an
    emoji the font draws as more than one glyph (or as nothing)."""
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.truetype(str(EMOJI_FONT), 109)  # the size of its one bitmap strike

    def draw(emoji: str):
        if font.getlength(emoji) > 140:  # not one glyph (one is 136 px wide)
            return None
        canvas = Image.new("RGBA", (160, 160), (0, 0, 0, 0))
        ImageDraw.Draw(canvas).text((10, 10), emoji, font=font, embedded_color=True)
        return _fit(canvas, 64, 64, (0, 0, 0, 0))

    return draw


def _emoji_set(folder: Path, label_of: Callable[[str, str], str], min_pictures: int = 1) -> dict[str, int]:
    """The emoji of `_emoji()` drawn once each (a picture drawn before left out), labelled by
    `label_of(group, subgroup)`; a label of fewer than `min_pictures` left out; stratified 80/20."""
    draw = _emoji_drawer()
    drawn: dict[str, tuple[str, Any]] = {}
    seen: set[str] = set()
    for emoji, group, subgroup in _emoji():
        picture = draw(emoji)
        if picture is None or _pixels_key(picture) in seen:
            continue
        seen.add(_pixels_key(picture))
        label = re.sub(r"[^a-z]+", "-", label_of(group, subgroup).lower()).strip("-")
        drawn["_".join(f"{ord(c):x}" for c in emoji)] = (label, picture)
    sizes = Counter(label for label, _ in drawn.values())
    drawn = {key: (label, picture) for key, (label, picture) in drawn.items() if sizes[label] >= min_pictures}
    test = _stratified_test((key, label) for key, (label, _) in drawn.items())
    pictures = [
        _Picture("test" if key in test else "train", label, key, picture) for key, (label, picture) in drawn.items()
    ]
    return _write_pictures(folder, pictures)


def make_emoji_groups(folder: Path) -> dict[str, int]:
    """Noto Color Emoji's emoji, 64x64 RGBA, by Unicode group; stratified 80/20. An emoji the
    font draws as more than one glyph is left out."""
    return _emoji_set(folder, lambda group, subgroup: group)


def make_emoji_subgroups(folder: Path) -> dict[str, int]:
    """The same emoji by Unicode subgroup (face-smiling, animal-mammal, transport-ground, ...),
    a subgroup of fewer than 16 emoji left out."""
    return _emoji_set(folder, lambda group, subgroup: subgroup, min_pictures=16)


SKIN_TONE_NAMES = dict(zip(sorted(SKIN_TONES), ("light", "medium-light", "medium", "medium-dark", "dark")))


def _toned_emoji() -> Iterator[tuple[str, str, str]]:
    """(emoji, its skin tone, the emoji without it) of emoji-test.txt's fully-qualified emoji
    that hold one skin tone (two people of two tones left out)."""
    for points, _, _ in _qualified_emoji():
        tones = {p for p in points if p in SKIN_TONES}
        if len(tones) == 1:
            base = "_".join(f"{p:x}" for p in points if p not in SKIN_TONES)
            yield "".join(map(chr, points)), SKIN_TONE_NAMES[tones.pop()], base


def make_emoji_skin_tones(folder: Path) -> dict[str, int]:
    """Noto Color Emoji's people and hands in one skin tone, 64x64 RGBA, by the tone (5); the test
    split is whole emoji (all tones of a fifth of the people and hands), unseen in training. An
    emoji the font draws as more than one glyph is left out."""
    draw = _emoji_drawer()
    drawn = [(base, tone, draw(emoji)) for emoji, tone, base in _toned_emoji()]
    drawn = [(base, tone, picture) for base, tone, picture in drawn if picture is not None]
    test = _group_test(dict(Counter(base for base, _, _ in drawn)))
    pictures = [_Picture("test" if base in test else "train", tone, base, picture) for base, tone, picture in drawn]
    return _write_pictures(folder, pictures)


# --------------------------------------------------------------------------- icons

ICON_CONTEXTS = ("actions", "apps", "categories", "devices", "emblems", "emotes", "mimetypes", "places", "status")
ICON_THEMES = {  # theme: a path pattern with {context}, or an SVG folder pattern for rsvg-convert
    "gnome": "/usr/share/icons/gnome/48x48/{context}/*.png",
    "mate": "/usr/share/icons/mate/48x48/{context}/*.png",
    "oxygen": "/usr/share/icons/oxygen/base/48x48/{context}/*.png",
    "tango": "/usr/share/icons/Tango/scalable/{context}/*.svg",
    "elementary-xfce": "/usr/share/icons/elementary-xfce/{context}/48/*.png",
}
ICON_ALIASES = {"elementary-xfce": {"mimetypes": "mimes"}}
ICON_TEST_THEMES = ("elementary-xfce",)


def _rgba(path: Path, side: Optional[int] = None):
    """A picture file as an RGBA picture; an SVG drawn by rsvg-convert, `side` pixels a side
    (None: at its own size), or None where it draws nothing."""
    from PIL import Image

    if path.suffix == ".svg":
        size = [] if side is None else ["-w", str(side), "-h", str(side)]
        out = subprocess.run(["rsvg-convert", *size, str(path)], capture_output=True, check=False).stdout
        if not out:
            return None
        opened = Image.open(io.BytesIO(out))
    else:
        opened = Image.open(path)
    with opened:
        return opened.convert("RGBA")


def _icon(path: Path):
    """An icon file as a 48x48 RGBA picture (an SVG drawn by rsvg-convert), or None."""
    from PIL import Image

    image = _rgba(path, 48)
    if image is None:
        return None
    return image if image.size == (48, 48) else image.resize((48, 48), Image.Resampling.LANCZOS)


def make_icon_contexts(folder: Path) -> dict[str, int]:
    """Colour icons of ICON_THEMES at 48 px, by their context folder; identical pictures once;
    the test split is ICON_TEST_THEMES."""
    from glob import glob

    pictures: list[_Picture] = []
    seen: set[str] = set()
    for theme, pattern in ICON_THEMES.items():
        for context in ICON_CONTEXTS:
            where = pattern.format(context=ICON_ALIASES.get(theme, {}).get(context, context))
            for name in sorted(glob(where)):
                path = Path(name)
                if "symbolic" in path.name:
                    continue
                try:
                    image = _icon(path)
                except OSError:
                    continue
                if image is None or image.getbbox() is None or _pixels_key(image) in seen:
                    continue
                seen.add(_pixels_key(image))
                split = "test" if theme in ICON_TEST_THEMES else "train"
                pictures.append(_Picture(split, context, f"{_safe(theme)}_{_safe(path.stem)}", image))
    counts = Counter((p.split, p.label) for p in pictures)
    keep = {c for c in ICON_CONTEXTS if counts["train", c] >= 20 and counts["test", c] >= 5}
    return _write_pictures(folder, _cap_train([p for p in pictures if p.label in keep]))


def _rsvg_probe() -> Optional[str]:
    """Whether rsvg-convert is there."""
    return None if shutil.which("rsvg-convert") else "apt-get install --no-install-recommends librsvg2-bin"


# --------------------------------------------------------------------------- playing cards

CARD_DECKS = ("/usr/share/aisleriot/cards/*.svgz", "/usr/share/carddecks/*/*.svgz")
SUITS = ("club", "diamond", "heart", "spade")
RANKS = ("1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "jack", "queen", "king")
RANK_NAMES = {"1": "ace"}
CARD_HEIGHT = 96
# a deck's family: the same art in another package, or in other colours or techniques
DECK_ALIASES = {"атласные": "atlasnye", "gm-paris": "paris", "nicu-ornamental": "ornamental", "jolly-royal": "jolly"}
DECK_SUFFIXES = re.compile(r"(_4_color|_bitmap|_skat|_poker|_modern|_nuevo|-classic|-international|-air|-white)$")
# run by Debian's python3 (python3-gi): librsvg draws each card (a layer of the deck, parsed once) in its logical box
CARD_RENDERER = r"""
import json, sys
import gi
gi.require_version("Rsvg", "2.0")
from gi.repository import Rsvg
import cairo
done = []
for deck, height, cards in json.load(sys.stdin):
    try:
        handle = Rsvg.Handle.new_from_file(deck)
        ok, width, page_height = handle.get_intrinsic_size_in_pixels()
    except Exception:
        continue
    if not ok:
        continue
    page = Rsvg.Rectangle()
    page.x, page.y, page.width, page.height = 0, 0, width, page_height
    for out, ids in cards:
        for cid in ids:
            try:
                if not handle.has_sub("#" + cid):
                    continue
                # the logical rectangle: the card itself (the ink one holds clipped-off artwork)
                ok, _, card = handle.get_geometry_for_layer("#" + cid, page)
            except Exception:
                continue
            if not ok or card.width < 1 or card.height < 1:
                continue
            scale = height / card.height
            surface = cairo.ImageSurface(cairo.FORMAT_ARGB32, max(1, round(card.width * scale)), height)
            context = cairo.Context(surface)
            context.scale(scale, scale)
            context.translate(-card.x, -card.y)
            handle.render_layer(context, "#" + cid, page)
            surface.write_to_png(out)
            done.append(out)
            break
json.dump(done, sys.stdout)
"""


def _render_layers(jobs: list) -> None:
    """Draw SVG layers by CARD_RENDERER (Debian's python3, librsvg): each job [the SVG file, the
    height to draw at, [[the PNG to write, [layer ids, the first the file has drawn]], ...]]."""
    proc = subprocess.run(
        [str(SYSTEM_PYTHON), "-c", CARD_RENDERER], input=json.dumps(jobs), capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise RuntimeError(f"the SVG layer renderer failed: {proc.stderr.strip()[-500:]}")


def _deck_family(path: Path) -> str:
    """A deck's family (its file's name, aliases and variant suffixes taken off, or its folder's)."""
    name = path.name.removesuffix(".svgz").lower()
    if path.parent.name.startswith("svg-"):
        name = path.parent.name.removeprefix("svg-")
        name = DECK_ALIASES.get(name, name.removeprefix("xskat-"))
    name = DECK_ALIASES.get(name, name)
    while DECK_SUFFIXES.search(name):  # anglo_modern_4_color -> anglo_modern -> anglo
        name = DECK_SUFFIXES.sub("", name)
    return name


def _card_shaped(widths: list[int]) -> bool:
    """Whether a deck's cards (their widths at CARD_HEIGHT, sorted) are upright cards of one
    size: a box that holds more than the card (clipped-off artwork) makes a card wider."""
    median = widths[len(widths) // 2]
    return 0.5 <= median / CARD_HEIGHT <= 0.85 and all(abs(w - median) <= 0.15 * median for w in widths)


def _card_pictures() -> list[tuple[str, str, str, str, Any]]:
    """(deck, family, suit, rank, picture) of every deck's 52 cards, drawn at CARD_HEIGHT; a
    deck with a card missing, blank or not card-shaped, or whose pictures an earlier deck had,
    left out."""
    from glob import glob

    from PIL import Image

    decks = sorted({Path(p) for pattern in CARD_DECKS for p in glob(pattern)}, key=lambda p: (p.parent.name, p.name))
    cards = [(s, r) for s in SUITS for r in RANKS]
    out: list[tuple[str, str, str, str, Any]] = []
    seen_decks: set[str] = set()
    with tempfile.TemporaryDirectory(prefix="cards-") as tmp:
        jobs = [
            [str(deck), CARD_HEIGHT, [[f"{tmp}/{d}_{s}_{r}.png", [f"{s}_{r}", f"{r}_{s}"]] for s, r in cards]]
            for d, deck in enumerate(decks)
        ]
        _render_layers(jobs)
        for d, deck in enumerate(decks):
            drawn = []
            for s, r in cards:
                path = Path(f"{tmp}/{d}_{s}_{r}.png")
                if not path.exists():
                    break
                with Image.open(path) as opened:
                    image = opened.convert("RGBA")
                if image.getchannel("A").getbbox() is None or len(image.getcolors(1 << 16) or [0, 0]) < 2:
                    break
                drawn.append((s, r, image))
            widths = sorted(image.width for _, _, image in drawn)
            if len(drawn) < len(cards) or not _card_shaped(widths):
                continue
            key = hashlib.sha1(b"".join(_pixels_key(i).encode() for _, _, i in drawn)).hexdigest()
            if key in seen_decks:
                continue
            seen_decks.add(key)
            name = f"{d:02d}-{_safe(deck.name.removesuffix('.svgz'))}"
            out += [(name, _deck_family(deck), s, r, image) for s, r, image in drawn]
    return out


def _make_cards(folder: Path, label_of: Callable[[str, str], str]) -> dict[str, int]:
    """The cards of every deck, labelled by `label_of(suit, rank)`; whole deck families in test."""
    cards = _card_pictures()
    families = Counter(family for _, family, _, _, _ in cards)
    test = _group_test(dict(families))
    pictures = [
        _Picture("test" if family in test else "train", label_of(s, r), f"{deck}_{s}_{r}", image)
        for deck, family, s, r, image in cards
    ]
    return _write_pictures(folder, pictures)


def make_cards_suit(folder: Path) -> dict[str, int]:
    """Playing cards by suit (club, diamond, heart, spade); test: unseen deck families."""
    return _make_cards(folder, lambda suit, rank: suit)


def make_cards_rank(folder: Path) -> dict[str, int]:
    """Playing cards by rank (ace, 2-10, jack, queen, king); test: unseen deck families."""
    return _make_cards(folder, lambda suit, rank: RANK_NAMES.get(rank, rank))


def _cards_probe() -> Optional[str]:
    """Whether Debian's python3 has librsvg's and cairo's bindings."""
    code = "import gi; gi.require_version('Rsvg', '2.0'); from gi.repository import Rsvg; import cairo"
    try:
        ok = subprocess.run([str(SYSTEM_PYTHON), "-c", code], capture_output=True).returncode == 0
    except OSError:
        ok = False
    return None if ok else "apt-get install --no-install-recommends python3-gi python3-gi-cairo gir1.2-rsvg-2.0"


# --------------------------------------------------------------------------- mahjong tiles

# the 42 faces of a tileset by suit, in the order gnome-mahjongg's and xmahjongg's tile sheets hold
# them (dots, winds, the red and green dragons, characters, bamboo, four bonus tiles, the white
# dragon, four more bonus tiles: flowers and seasons)
MAHJONG_ORDER = (
    ["dots"] * 9 + ["winds"] * 4 + ["dragons"] * 2 + ["characters"] * 9 + ["bamboo"] * 9 + ["bonus"] * 4
    + ["dragons"] + ["bonus"] * 4
)  # fmt: skip
KDE_TILESETS = "/usr/share/kmahjongglib/tilesets/*.svgz"
# tilesets whose faces do not draw the suits' signs (letters and digits; Kangxi radicals), or
# draw them white for the tile's body, which is not drawn here (jade)
MAHJONG_LEFT_OUT = {"alphabet", "edu_kang_xi", "jade"}
# a KDE tileset's face layers: NAME_1 .. NAME_n, by suit
KDE_FACES = {"ROD": ("dots", 9), "BAMBOO": ("bamboo", 9), "CHARACTER": ("characters", 9), "WIND": ("winds", 4)}
KDE_FACES |= {"DRAGON": ("dragons", 3), "FLOWER": ("bonus", 4), "SEASON": ("bonus", 4)}
# sheets of 43 columns (MAHJONG_ORDER, then a blank) and 2 rows (the tile, then highlighted)
GNOME_MAHJONGG_THEMES = "/usr/share/gnome-mahjongg/themes/*"
# sheets of 21 columns of 64x64 cells, MAHJONG_ORDER over the first two rows (the next two
# highlighted); xmahjongg's gnome and gnome2 sheets draw their last four bonus tiles as the winds,
# and its small, thin and thick sets are animations: not used
XMAHJONGG_SHEETS = ("/usr/share/games/xmahjongg/tiles/dorothys.gif", "/usr/share/games/xmahjongg/tiles/dorwhite.gif")
MAHJONG_SIDE = 64


def _kde_tiles(tmp: str) -> list[tuple[str, str, Any]]:
    """(tileset, suit, picture) of the faces of KDE's tilesets, drawn by librsvg at 64 px high
    (the face alone, without the tile's body); a tileset without every face left out."""
    from glob import glob

    faces = [(f"{name}_{i}", suit) for name, (suit, n) in KDE_FACES.items() for i in range(1, n + 1)]
    sets = sorted(p for p in glob(KDE_TILESETS) if Path(p).name.removesuffix(".svgz") not in MAHJONG_LEFT_OUT)
    jobs = [
        [path, MAHJONG_SIDE, [[f"{tmp}/{t}_{face}.png", [face]] for face, _ in faces]] for t, path in enumerate(sets)
    ]
    _render_layers(jobs)
    out = []
    for t, path in enumerate(sets):
        files = [Path(f"{tmp}/{t}_{face}.png") for face, _ in faces]
        if all(f.exists() for f in files):
            name = "kde-" + Path(path).name.removesuffix(".svgz")
            out += [(name, suit, _rgba(f)) for (_, suit), f in zip(faces, files)]
    return out


def _sheet_tiles(sheet, columns: int, cell: tuple[int, int]) -> list[tuple[str, Any]]:
    """(suit, picture) of a tile sheet's MAHJONG_ORDER cells, read row by row."""
    width, height = cell
    boxes = [((i % columns) * width, (i // columns) * height) for i in range(len(MAHJONG_ORDER))]
    return [(suit, sheet.crop((x, y, x + width, y + height))) for suit, (x, y) in zip(MAHJONG_ORDER, boxes)]


def _sheet_sets() -> list[tuple[str, str, Any]]:
    """(tileset, suit, picture) of gnome-mahjongg's themes (its SVG drawn by rsvg-convert) and
    xmahjongg's two sheets of Dorothy Robinson's tiles (one family)."""
    from glob import glob

    out = []
    for path in sorted(Path(p) for p in glob(GNOME_MAHJONGG_THEMES) if Path(p).stem not in MAHJONG_LEFT_OUT):
        sheet = _rgba(path)
        if sheet is None:
            raise RuntimeError(f"rsvg-convert drew nothing of {path}")
        cells = _sheet_tiles(sheet, 43, (sheet.width // 43, sheet.height // 2))
        out += [("gnome-" + path.stem, suit, tile) for suit, tile in cells]
    for sheet in map(_rgba, map(Path, XMAHJONGG_SHEETS)):
        out += [("xmahjongg-dorothy", suit, tile) for suit, tile in _sheet_tiles(sheet, 21, (64, 64))]
    return out


def make_mahjong_suits(folder: Path) -> dict[str, int]:
    """The 42 faces of the mahjong tilesets of KDE, gnome-mahjongg and xmahjongg (but
    MAHJONG_LEFT_OUT's), 64x64 RGBA, by suit (dots, bamboo, characters, winds, dragons, bonus), a
    blank face left out; test: whole tilesets, unseen in training."""
    with tempfile.TemporaryDirectory(prefix="tiles-") as tmp:
        tiles = _kde_tiles(tmp) + _sheet_sets()
    fitted = [(family, suit, _fit(tile, MAHJONG_SIDE, MAHJONG_SIDE, (0, 0, 0, 0))) for family, suit, tile in tiles]
    fitted = [(family, suit, picture) for family, suit, picture in fitted if picture is not None]  # a blank face
    test = _group_test(dict(Counter(family for family, _, _ in fitted)))
    pictures = [
        _Picture("test" if family in test else "train", suit, f"{family}_{i:02d}", picture)
        for i, (family, suit, picture) in enumerate(fitted)
    ]
    return _write_pictures(folder, pictures)


# --------------------------------------------------------------------------- Debian's package lists


def _apt_list(pattern: str) -> Iterator[dict[str, str]]:
    """The stanzas of apt's lists matching `pattern` (decompressed by apt-helper), the files in
    sorted order: each a dict of its fields (a multi-line field's lines joined by newlines)."""
    for path in sorted(APT_LISTS.glob(pattern)):
        if path.name.endswith(("diff_Index", ".IndexDiff")):
            continue
        text = subprocess.run(
            [str(APT_HELPER), "cat-file", str(path)], capture_output=True, text=True, check=True
        ).stdout
        for block in text.split("\n\n"):
            fields: dict[str, str] = {}
            key = ""
            for line in block.splitlines():
                if line.startswith((" ", "\t")) and key:
                    fields[key] += "\n" + line
                elif ":" in line:
                    key, value = line.split(":", 1)
                    fields[key] = value.strip()
            if "Package" in fields:
                yield fields


def _packages() -> dict[str, dict[str, str]]:
    """Every package of apt's lists by name (the first stanza of a name, in sorted list order)."""
    packages: dict[str, dict[str, str]] = {}
    for fields in _apt_list("*_Packages*"):
        packages.setdefault(fields["Package"], fields)
    return packages


def _section(fields: dict[str, str]) -> str:
    """A package's section without its archive area (contrib/, non-free/)."""
    return fields.get("Section", "").rsplit("/", 1)[-1]


def make_debian_sections(folder: Path, top: int = 12) -> dict[str, int]:
    """Short package descriptions -> section, the `top` most common sections."""
    rows = [(f.get("Description", ""), _section(f)) for f in _packages().values()]
    common = {s for s, _ in Counter(label for _, label in rows).most_common(top)}
    return _write_rows(folder, "debian_sections", _cap_rows(_clean_rows(r for r in rows if r[1] in common)))


SECTION_GROUPS = {
    "libraries": "libs libdevel oldlibs introspection",
    "language_modules": "python perl haskell rust golang javascript java ruby gnu-r php ocaml lisp cli-mono "
    "interpreters gnustep zope",
    "development": "devel debug vcs",
    "documentation": "doc",
    "desktop_media": "x11 gnome kde xfce graphics sound video games fonts",
    "network": "net web mail httpd comm news",
    "system": "admin utils kernel shells otherosfs database embedded",
    "science": "science math electronics hamradio education",
    "text": "text tex editors localization",
}
GROUP_OF_SECTION = {section: group for group, sections in SECTION_GROUPS.items() for section in sections.split()}


def _long_description(text: str) -> str:
    """The long part of a Description-en field: its lines after the first, ' .' lines as breaks."""
    lines = [line[1:] if line.startswith(" ") else line for line in text.split("\n")[1:]]
    return "\n".join("" if line.strip() == "." else line for line in lines).strip()


def make_debian_groups(folder: Path) -> dict[str, int]:
    """Long package descriptions -> coarse section group (SECTION_GROUPS), one package a source."""
    packages = _packages()
    descriptions: dict[str, str] = {}
    for fields in _apt_list("*_i18n_Translation-en*"):
        descriptions.setdefault(fields["Package"], _long_description(fields.get("Description-en", "")))
    rows, sources = [], set()
    for name in sorted(packages):
        fields = packages[name]
        source = fields.get("Source", name).split()[0]
        group = GROUP_OF_SECTION.get(_section(fields))
        if group and source not in sources and descriptions.get(name):
            sources.add(source)
            rows.append((descriptions[name], group))
    return _write_rows(folder, "debian_groups", _cap_rows(_clean_rows(rows)))


def _translations_probe() -> Optional[str]:
    """Whether apt's lists hold the English long descriptions."""
    if any(APT_LISTS.glob("*_i18n_Translation-en*")):
        return None
    return "apt-get update -o Acquire::Languages=en"


def _apt_probe() -> Optional[str]:
    """Whether apt's lists are there."""
    return None if any(APT_LISTS.glob("*_Packages*")) else "apt-get update"


# --------------------------------------------------------------------------- manual pages

MAN_ROOT = Path("/usr/share/man")


def _dpkg_owners(prefix: str) -> dict[str, str]:
    """The files under `prefix` that dpkg installed, and their package."""
    owners: dict[str, str] = {}
    for listing in sorted(DPKG_INFO.glob("*.list")):
        package = listing.name.removesuffix(".list").split(":")[0]
        for line in listing.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith(prefix):
                owners.setdefault(line, package)
    return owners


def make_man_sections(folder: Path) -> dict[str, int]:
    """NAME lines (`name - description`, man-db's lexgrog) of the manual pages of Debian's
    packages -> their section (1-8); a page that merely includes another (.so) left out."""
    owners = _dpkg_owners(str(MAN_ROOT) + "/man")
    known = set(_packages())
    pages = sorted(
        p for p in MAN_ROOT.glob("man[1-8]/*") if p.is_file() and not p.is_symlink() and owners.get(str(p)) in known
    )
    rows = []
    for start in range(0, len(pages), 500):
        chunk = pages[start : start + 500]
        out = subprocess.run(["lexgrog", *map(str, chunk)], capture_output=True, text=True).stdout
        for line in out.splitlines():
            match = re.match(r'^(.*?): "(.*)"$', line)
            if match and " - " in match.group(2):
                section = Path(match.group(1)).parent.name.removeprefix("man")
                rows.append((match.group(2), section))
    return _write_rows(folder, "man_sections", _cap_rows(_clean_rows(rows)))


def _lexgrog_probe() -> Optional[str]:
    """Whether man-db's lexgrog is there."""
    return None if shutil.which("lexgrog") else "apt-get install --no-install-recommends man-db"


# --------------------------------------------------------------------------- fortunes

FORTUNES = Path("/usr/share/games/fortunes")
FORTUNE_LANGUAGES = {"de": "de", "es": "es", "it": "it", "ru": "ru", "pl": "pl", "cs": "cs"}
FORTUNES_PER_LANGUAGE = 1700


def _fortunes(path: Path) -> list[str]:
    """The fortunes of a fortune file ('%' lines between them), UTF-8 or else Latin-1."""
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    return [f.strip() for f in re.split(r"(?m)^%\s*$", text.replace("\r\n", "\n")) if f.strip()]


def _fortune_files(folder: Path, packages: tuple[str, ...] = ()) -> list[Path]:
    """The fortune files of a folder (not their .dat or .u8 twins), of `packages` when given (dpkg's lists)."""
    files = [
        p
        for p in sorted(folder.iterdir())
        if p.is_file() and not p.name.endswith((".dat", ".u8")) and (folder / f"{p.name}.dat").exists()
    ]
    if packages:
        owned = set()
        for package in packages:
            listing = DPKG_INFO / f"{package}.list"
            if listing.exists():
                owned.update(listing.read_text(encoding="utf-8").splitlines())
        files = [p for p in files if str(p) in owned]
    return files


def make_fortune_topics(folder: Path) -> dict[str, int]:
    """English fortunes -> their file (topic); files with at least 50 fortunes."""
    rows = [(f, p.name) for p in _fortune_files(FORTUNES, ("fortunes", "fortunes-min")) for f in _fortunes(p)]
    return _write_rows(folder, "fortune_topics", _cap_rows(_clean_rows(rows)))


def make_fortune_languages(folder: Path) -> dict[str, int]:
    """Fortunes -> their language (en and FORTUNE_LANGUAGES), FORTUNES_PER_LANGUAGE each at most."""
    sources = {"en": _fortune_files(FORTUNES, ("fortunes", "fortunes-min"))}
    sources.update({lang: _fortune_files(FORTUNES / sub) for lang, sub in FORTUNE_LANGUAGES.items()})
    rng = random.Random(SEED)
    rows: list[tuple[str, str]] = []
    for lang, files in sources.items():
        texts = sorted({" ".join(f.split()) for p in files for f in _fortunes(p)})
        rng.shuffle(texts)
        rows += [(t, lang) for t in texts[:FORTUNES_PER_LANGUAGE]]
    return _write_rows(folder, "fortune_languages", _cap_rows(_clean_rows(rows)))


# --------------------------------------------------------------------------- WordNet

WORDNET_NOUNS = Path("/usr/share/wordnet/data.noun")
NOUN_FILES = (
    "tops act animal artifact attribute body cognition communication event feeling food group location motive "
    "object person phenomenon plant possession process quantity relation shape state substance time"
).split()  # lexicographer files 3-28 (lexnames(5WN))
WORDNET_PER_CLASS = 500


def make_wordnet_nouns(folder: Path) -> dict[str, int]:
    """WordNet's noun definitions (examples left off) -> lexicographer file, WORDNET_PER_CLASS a class at most."""
    rows = []
    for line in WORDNET_NOUNS.read_text(encoding="utf-8", errors="replace").splitlines():
        if not line[:1].isdigit() or " | " not in line:
            continue
        fields, gloss = line.split(" | ", 1)
        lexfile = int(fields.split()[1])
        definition = re.split(r';\s*"', gloss)[0].strip(" ;")
        if 3 <= lexfile <= 28 and definition:
            rows.append((definition, NOUN_FILES[lexfile - 3]))
    rows = _clean_rows(rows)
    rng = random.Random(SEED)
    by_class: dict[str, list[tuple[str, str]]] = {}
    for row in rows:
        by_class.setdefault(row[1], []).append(row)
    kept = []
    for label in sorted(by_class):
        members = by_class[label]
        rng.shuffle(members)
        kept += members[:WORDNET_PER_CLASS]
    return _write_rows(folder, "wordnet_nouns", _cap_rows(kept))


# --------------------------------------------------------------------------- the King James Bible

BIBLE_DIVISIONS = {
    "law": "Genesis Exodus Leviticus Numbers Deuteronomy",
    "history": "Joshua Judges Ruth 1Samuel 2Samuel 1Kings 2Kings 1Chronicles 2Chronicles Ezra Nehemiah Esther",
    "wisdom": "Job Psalms Proverbs Ecclesiastes Song",
    "major_prophets": "Isaiah Jeremiah Lamentations Ezekiel Daniel",
    "minor_prophets": "Hosea Joel Amos Obadiah Jonah Micah Nahum Habakkuk Zephaniah Haggai Zechariah Malachi",
    "gospels": "Matthew Mark Luke John",
    "acts_epistles": "Acts Romans 1Corinthians 2Corinthians Galatians Ephesians Philippians Colossians "
    "1Thessalonians 2Thessalonians 1Timothy 2Timothy Titus Philemon Hebrews James 1Peter 2Peter 1John 2John "
    "3John Jude",
    "revelation": "Revelation",
}
DIVISION_OF_BOOK = {book: division for division, books in BIBLE_DIVISIONS.items() for book in books.split()}


def make_bible_verses(folder: Path) -> dict[str, int]:
    """The KJV's verses (the `bible` program of bible-kjv) -> the division of their book."""
    out = subprocess.run(["bible", "-l100000", "Gen1:1-Rev22:21"], capture_output=True, text=True, check=True).stdout
    rows, division = [], None
    for line in out.splitlines():
        header = re.match(r"^(\S.*?) \d+$", line)
        if header:
            book = header.group(1).replace(" ", "")
            book = "Song" if book.startswith("Song") else book
            division = DIVISION_OF_BOOK.get(book)
            if division is None:
                raise RuntimeError(f"bible: a book of no division: {header.group(1)!r}")
        verse = re.match(r"^\s+\d+\s+(.*)$", line)
        if verse and division:
            rows.append((verse.group(1), division))
    return _write_rows(folder, "bible_verses", _cap_rows(_clean_rows(rows)))


def _bible_probe() -> Optional[str]:
    """Whether bible-kjv's `bible` is there."""
    return None if shutil.which("bible") else "apt-get install --no-install-recommends bible-kjv bible-kjv-text"


# --------------------------------------------------------------------------- docstrings

# packages of the project's environment, each a library of its own domain; a package missing is
# left out (`make_docstrings` needs at least two)
DOCSTRING_PACKAGES = (
    "numpy", "scipy", "pandas", "sklearn", "matplotlib", "networkx", "sqlalchemy", "fontTools",
    "celery", "dulwich", "hypothesis", "PIL", "mlflow", "dvc",
)  # fmt: skip


def _package_folder(package: str) -> Optional[Path]:
    """Where `package` is installed, without importing it; None where it is not."""
    import importlib.util

    spec = importlib.util.find_spec(package)
    places = list(spec.submodule_search_locations or []) if spec else []
    return Path(places[0]) if places else None


def _first_paragraphs(source: str) -> Iterator[str]:
    """The first paragraph of each function's and class's docstring in Python `source`."""
    import ast

    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            doc = ast.get_docstring(node)
            if doc:
                yield doc.strip().split("\n\n")[0]


def make_docstrings(folder: Path) -> dict[str, int]:
    """The first paragraph of the docstrings of the functions and classes of DOCSTRING_PACKAGES
    (their tests and vendored copies left out) -> the package; of three words or more."""
    rows = []
    for package in DOCSTRING_PACKAGES:
        where = _package_folder(package)
        if where is None:
            continue
        for path in sorted(where.rglob("*.py")):
            parts = set(path.relative_to(where).parts[:-1])
            if parts & {"tests", "test", "testing", "_vendor", "vendored", "externals", "_lib"}:
                continue
            for text in _first_paragraphs(path.read_text(encoding="utf-8", errors="replace")):
                if len(text.split()) >= 3:
                    rows.append((text, package))
    return _write_rows(folder, "docstrings", _cap_rows(_clean_rows(rows)))


# --------------------------------------------------------------------------- the sets

FONT_PACKAGES = (
    "fonts-dejavu-core", "fonts-dejavu-extra", "fonts-liberation", "fonts-liberation2", "fonts-freefont-ttf",
    "fonts-noto-core", "fonts-urw-base35", "fonts-croscore", "fonts-crosextra-carlito", "fonts-crosextra-caladea",
    "fonts-lato", "fonts-open-sans", "fonts-roboto-unhinted", "fonts-cantarell", "fonts-linuxlibertine",
    "fonts-texgyre", "fonts-lmodern", "fonts-ebgaramond", "fonts-inconsolata", "fonts-hack", "fonts-firacode",
    "fonts-noto-mono",
)  # fmt: skip
ICON_PACKAGES = (
    "gnome-icon-theme", "mate-icon-theme", "oxygen-icon-theme", "tango-icon-theme", "elementary-xfce-icon-theme",
    "librsvg2-bin",
)  # fmt: skip
CARD_PACKAGES = ("gnome-cards-data", "kdegames-card-data-kf5", "python3-gi", "python3-gi-cairo", "gir1.2-rsvg-2.0")
MAHJONG_PACKAGES = ("kdegames-mahjongg-data-kf5", "gnome-mahjongg", "xmahjongg", "librsvg2-bin", *CARD_PACKAGES[2:])
FORTUNE_LANGUAGE_PACKAGES = tuple(f"fortunes-{lang}" for lang in FORTUNE_LANGUAGES)
TRANSLATION_ENV = "apt-get update -o Acquire::Languages=en"


# --------------------------------------------------------------------------- tables


def _write_table(folder: Path, name: str, header: list[str], rows: list[list]) -> dict[str, int]:
    """The rows as folder/<name>.csv (UTF-8, a header line; None as an empty field)."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"{name}.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows([["" if v is None else v for v in row] for row in rows])
    return {"rows": len(rows)}


def make_sk_table(loader: str, name: str) -> Callable[[Path], dict]:
    """scikit-learn's bundled table `loader` (load_iris, ...): its feature columns, each row's
    class name as `label`, in a seeded order."""

    def make(folder: Path) -> dict[str, int]:
        from sklearn import datasets

        bunch = getattr(datasets, loader)()
        header = [str(c).replace(" ", "_") for c in bunch.feature_names] + ["label"]
        rows = [[*map(float, x), str(bunch.target_names[y])] for x, y in zip(bunch.data, bunch.target)]
        random.Random(SEED).shuffle(rows)
        return _write_table(folder, name, header, rows)

    return make


def _count(field: str) -> int:
    """The packages a Depends-like field names (its comma-separated clauses)."""
    return len([c for c in field.split(",") if c.strip()]) if field else 0


def make_debian_packages(folder: Path) -> dict[str, int]:
    """apt's package records as a table -> coarse section group (SECTION_GROUPS): the name and
    version (what identifies a row), the maintainer, architecture, priority and multi-arch
    (categories, some missing), sizes and the counts of dependencies (numbers); one package a
    source, at most MAX_TEXT_ROWS rows, each class cut in proportion."""
    packages = _packages()
    rows, sources = [], set()
    for name in sorted(packages):
        fields = packages[name]
        source = fields.get("Source", name).split()[0]
        group = GROUP_OF_SECTION.get(_section(fields))
        if group is None or source in sources:
            continue
        sources.add(source)
        rows.append(
            [
                name,
                fields.get("Version"),
                fields.get("Maintainer", "").split("<")[0].strip() or None,
                fields.get("Architecture"),
                fields.get("Priority"),
                fields.get("Multi-Arch"),
                int(fields["Installed-Size"]) if fields.get("Installed-Size", "").isdigit() else None,
                int(fields["Size"]) if fields.get("Size", "").isdigit() else None,
                _count(fields.get("Depends", "")),
                _count(fields.get("Recommends", "")),
                _count(fields.get("Suggests", "")),
                "yes" if fields.get("Homepage") else "no",
                group,
            ]
        )
    header = [
        "package", "version", "maintainer", "architecture", "priority", "multi_arch", "installed_size", "size",
        "depends", "recommends", "suggests", "homepage", "label",
    ]  # fmt: skip
    kept = {name for name, _ in _cap_rows([(str(r[0]), str(r[-1])) for r in rows])}
    rows = [r for r in rows if r[0] in kept]
    random.Random(SEED).shuffle(rows)
    return _write_table(folder, "debian_packages", header, rows)


def _not_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return text != ""
    return False


def table_rows(folder: Path) -> tuple[list[str], list[dict]]:
    """The header and rows (each a dict of text values) of a table set's CSV file."""
    (path,) = sorted(folder.glob("*.csv"))
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        return list(reader.fieldnames or []), list(reader)


def _text_set(name: str, make: Callable[[Path], dict], **kwargs) -> RealSet:
    """A set of kind labelled_texts."""
    return RealSet(name=name, kind="labelled_texts", make=make, **kwargs)


def _table_set(name: str, make: Callable[[Path], dict], **kwargs) -> RealSet:
    """A set of kind tables."""
    return RealSet(name=name, kind="tables", make=make, **kwargs)


def _picture_set(name: str, make: Callable[[Path], dict], **kwargs) -> RealSet:
    """A set of kind image_folders."""
    return RealSet(name=name, kind="image_folders", make=make, **kwargs)


_SETS = (
    _picture_set(
        "sk_digits",
        make_sk_digits,
        title="scikit-learn's bundled digits (UCI optical digits), 8x8 grey, stratified 80/20",
        needs=(),
        size="1,437/360 pictures, 10 classes, 8x8 L",
        probe=_sklearn_probe,
    ),
    _picture_set(
        "font_digits",
        make_font_digits,
        title="digits 0-9 drawn from the fonts of Debian's font packages, 28x28 grey, test: unseen families",
        needs=FONT_PACKAGES,
        size="1,670/530 pictures, 10 classes, 28x28 L",
        paths=FONT_PROBES,
        probe=_fonttools_probe,
    ),
    _picture_set(
        "font_letters",
        make_font_letters,
        title="letters a-z drawn from the fonts of Debian's font packages, 32x32 grey, test: unseen families",
        needs=FONT_PACKAGES,
        size="4,654/1,482 pictures, 26 classes, 32x32 L",
        paths=FONT_PROBES,
        probe=_fonttools_probe,
    ),
    _picture_set(
        "font_scripts",
        make_font_scripts,
        title="letters of 14 writing systems from Debian's fonts (Noto, DejaVu, FreeFont...), 32x32 grey, "
        "class: script, test: unseen characters",
        needs=FONT_PACKAGES,
        size="4,166/1,043 pictures, 14 classes, 32x32 L",
        paths=FONT_PROBES,
        probe=_fonttools_probe,
    ),
    _picture_set(
        "emoji_groups",
        make_emoji_groups,
        title="Noto Color Emoji's emoji, 64x64 RGBA, by Unicode emoji group (fonts-noto-color-emoji, unicode-data)",
        size="1,489/372 pictures, 9 classes, 64x64 RGBA",
        **EMOJI_SOURCES,
    ),
    _picture_set(
        "emoji_subgroups",
        make_emoji_subgroups,
        title="the same emoji by Unicode subgroup (39 of 16 or more emoji), 64x64 RGBA",
        size="1,102/271 pictures, 39 classes, 64x64 RGBA",
        **EMOJI_SOURCES,
    ),
    _picture_set(
        "emoji_skin_tones",
        make_emoji_skin_tones,
        title="Noto Color Emoji's people and hands by skin tone (5), 64x64 RGBA, test: unseen emoji",
        size="1,220/305 pictures, 5 classes, 64x64 RGBA",
        **EMOJI_SOURCES,
    ),
    _picture_set(
        "icon_contexts",
        make_icon_contexts,
        title="48 px colour icons of five Debian icon themes by context (apps, devices, ...), test: elementary-xfce",
        needs=ICON_PACKAGES,
        size="2,076/576 pictures, 8 classes, 48x48 RGBA",
        paths=tuple(pattern.split("{context}")[0] for pattern in ICON_THEMES.values()),
        probe=_rsvg_probe,
    ),
    _picture_set(
        "cards_suit",
        make_cards_suit,
        title="playing cards of aisleriot's and KDE's SVG decks, 96 px high RGBA, class: suit, test: unseen decks",
        needs=CARD_PACKAGES,
        size="1,664/468 pictures, 4 classes, ~66x96 RGBA",
        paths=("/usr/share/aisleriot/cards", "/usr/share/carddecks"),
        probe=_cards_probe,
    ),
    _picture_set(
        "cards_rank",
        make_cards_rank,
        title="playing cards of aisleriot's and KDE's SVG decks, 96 px high RGBA, class: rank, test: unseen decks",
        needs=CARD_PACKAGES,
        size="1,664/468 pictures, 13 classes, ~66x96 RGBA",
        paths=("/usr/share/aisleriot/cards", "/usr/share/carddecks"),
        probe=_cards_probe,
    ),
    _picture_set(
        "mahjong_suits",
        make_mahjong_suits,
        title="mahjong tiles of KDE, gnome-mahjongg and xmahjongg tilesets, 64x64 RGBA, by suit, test: unseen sets",
        needs=MAHJONG_PACKAGES,
        size="252/84 pictures, 6 classes, 64x64 RGBA",
        paths=("/usr/share/kmahjongglib/tilesets", "/usr/share/gnome-mahjongg/themes", *XMAHJONGG_SHEETS),
        probe=lambda: _rsvg_probe() or _cards_probe(),
    ),
    _text_set(
        "docstrings",
        make_docstrings,
        title="the first paragraph of a docstring of a Python library of the project's environment -> the library",
        needs=(),
        size="12,493 rows, 14 classes, ~9 words",
    ),
    _text_set(
        "debian_sections",
        make_debian_sections,
        title="Debian package short descriptions (apt's lists) -> section, the 12 most common",
        needs=(),
        size="12,494 rows, 12 classes, ~7 words",
        probe=_apt_probe,
    ),
    _text_set(
        "debian_groups",
        make_debian_groups,
        title="Debian package long descriptions (apt's Translation-en) -> coarse section group, one a source",
        needs=(),
        size="12,495 rows, 9 classes, ~47 words",
        probe=_translations_probe,
    ),
    _text_set(
        "man_sections",
        make_man_sections,
        title="NAME lines of the manual pages of Debian packages (lexgrog) -> section 1-8",
        needs=("manpages", "manpages-dev", "man-db"),
        size="4,882 rows, 6 classes, ~7 words",
        paths=(str(MAN_ROOT),),
        probe=lambda: _lexgrog_probe() or _apt_probe(),
    ),
    _text_set(
        "fortune_topics",
        make_fortune_topics,
        title="English fortunes (fortunes, fortunes-min) -> their topic file",
        needs=("fortunes", "fortunes-min"),
        size="12,503 rows, 39 classes, ~17 words",
        paths=(str(FORTUNES / "art"), str(FORTUNES / "computers")),
    ),
    _text_set(
        "fortune_languages",
        make_fortune_languages,
        title="fortunes in en, de, es, it, ru, pl, cs (fortunes-*) -> language",
        needs=("fortunes", *FORTUNE_LANGUAGE_PACKAGES),
        size="11,900 rows, 7 classes, ~16 words",
        paths=(str(FORTUNES / "art"), *(str(FORTUNES / d) for d in FORTUNE_LANGUAGES.values())),
    ),
    _text_set(
        "wordnet_nouns",
        make_wordnet_nouns,
        title="WordNet's noun definitions (wordnet-base) -> lexicographer file (animal, food, person, ...)",
        needs=("wordnet-base",),
        size="11,754 rows, 25 classes, ~10 words",
        paths=(str(WORDNET_NOUNS),),
    ),
    _text_set(
        "bible_verses",
        make_bible_verses,
        title="King James Bible verses (bible-kjv) -> division of their book (law, gospels, ...)",
        needs=("bible-kjv", "bible-kjv-text"),
        size="12,497 rows, 8 classes, ~24 words",
        probe=_bible_probe,
    ),
    _table_set(
        "sk_iris",
        make_sk_table("load_iris", "sk_iris"),
        title="scikit-learn's bundled iris (Fisher's measurements of 3 species), 4 numeric columns",
        needs=(),
        size="150 rows, 3 classes, 4 columns",
        probe=_sklearn_probe,
    ),
    _table_set(
        "sk_wine",
        make_sk_table("load_wine", "sk_wine"),
        title="scikit-learn's bundled wine (UCI: chemical analysis of 3 cultivars), 13 numeric columns",
        needs=(),
        size="178 rows, 3 classes, 13 columns",
        probe=_sklearn_probe,
    ),
    _table_set(
        "sk_breast_cancer",
        make_sk_table("load_breast_cancer", "sk_breast_cancer"),
        title="scikit-learn's bundled breast cancer (UCI Wisconsin diagnostic), 30 numeric columns",
        needs=(),
        size="569 rows, 2 classes, 30 columns",
        probe=_sklearn_probe,
    ),
    _table_set(
        "debian_packages",
        make_debian_packages,
        title="apt's package records as a table (sizes, dependency counts, priority, ...) -> section group",
        needs=(),
        size="~12,500 rows, 9 classes, 12 columns",
        probe=_apt_probe,
    ),
)
SETS: dict[str, RealSet] = {s.name: s for s in _SETS}


def available(s: RealSet) -> str | None:
    """None when the set's source is on this machine, else what would bring it (a command)."""
    missing = [p for p in s.paths if not Path(p).exists()]
    if missing:
        return f"apt-get install --no-install-recommends {' '.join(s.needs)}" if s.needs else f"missing: {missing[0]}"
    return s.probe()


# --------------------------------------------------------------------------- arrays and yardsticks


def picture_arrays(folder: Path, side: int, color: str):
    """x_train, y_train, x_test, y_test of an image folders set: each picture laid on white where
    transparent, made 'L' (color "grey") or 'RGB' (color "rgb"), resized to side x side, flattened
    float32 in [0, 1]; the labels are the class folders' names (numpy arrays of str). Each is
    read by the pipeline's own reader (pipeline/data/images.py), so the pixels are the ones it
    trains on."""
    import numpy as np

    from pipeline.data.images import picture

    arrays = []
    for split in ("train", "test"):
        paths = sorted(p for p in folder.glob(f"{split}/*/*") if p.suffix.lower() in PICTURE_SUFFIXES)
        x = np.stack([picture(p.read_bytes(), str(p), side, color).astype(np.float32).ravel() / 255 for p in paths])
        arrays += [x, np.array([p.parent.name for p in paths])]
    return tuple(arrays)


def picture_yardsticks(folder: Path, side: int, color: str, timings: Optional[dict] = None) -> dict:
    """{"svc": accuracy, "logistic": accuracy}: scikit-learn's SVC() (RBF, its defaults) and
    LogisticRegression(max_iter=5000) on `picture_arrays`; each fit's seconds into `timings`."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.svm import SVC

    x_train, y_train, x_test, y_test = picture_arrays(folder, side, color)
    scores = {}
    for name, model in (("svc", SVC()), ("logistic", LogisticRegression(max_iter=5000))):
        start = time.perf_counter()
        model.fit(x_train, y_train)
        if timings is not None:
            timings[name] = round(time.perf_counter() - start, 2)
        scores[name] = float((model.predict(x_test) == y_test).mean())
    return scores


TEXT_LOGISTIC_C = 10.0  # TF-IDF rows are unit vectors: C=1 underfits them (a few points lower)


def text_yardsticks(train_texts, train_labels, test_texts, test_labels, timings: Optional[dict] = None) -> dict:
    """{"linear_svc": accuracy, "logistic": accuracy}: TfidfVectorizer(sublinear_tf=True,
    ngram_range=(1, 2), min_df=1) fitted on the training texts, then LinearSVC() and
    LogisticRegression(max_iter=5000, C=10); each fit's seconds (TF-IDF's included) into `timings`."""
    import numpy as np
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.svm import LinearSVC

    start = time.perf_counter()
    vectorizer = TfidfVectorizer(sublinear_tf=True, ngram_range=(1, 2), min_df=1)
    x_train = vectorizer.fit_transform(train_texts)
    x_test = vectorizer.transform(test_texts)
    tfidf_seconds = time.perf_counter() - start
    scores = {}
    models = (("linear_svc", LinearSVC()), ("logistic", LogisticRegression(max_iter=5000, C=TEXT_LOGISTIC_C)))
    for name, model in models:
        start = time.perf_counter()
        model.fit(x_train, list(train_labels))
        if timings is not None:
            timings[name] = round(time.perf_counter() - start + tfidf_seconds, 2)
        scores[name] = float((model.predict(x_test) == np.array(test_labels)).mean())
    return scores


def table_yardsticks(
    train: list[dict], test: list[dict], label: str, categorical: list[str], ignore: list[str],
    timings: Optional[dict] = None,
) -> dict:  # fmt: skip
    """{"logistic": accuracy, "boosted": accuracy}: every column but the label and `ignore`'s, the
    numbers standardised (a missing one as the training mean) and the categories one-hot (a
    missing one its own, an unseen one none), then LogisticRegression(max_iter=5000); and
    HistGradientBoostingClassifier on the numbers and the categories as ordinal codes (a missing
    value or an unseen one a code of its own; a column of more than 250 categories as its codes'
    order); each fit's seconds into `timings`."""
    import numpy as np
    from sklearn.compose import ColumnTransformer
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, OrdinalEncoder, StandardScaler

    columns = [c for c in train[0] if c != label and c not in ignore]
    numeric = [c for c in columns if c not in categorical]

    def frame(rows: list[dict]):
        import pandas as pd

        data = pd.DataFrame([{c: r[c] for c in columns} for r in rows])
        for c in numeric:
            data[c] = pd.to_numeric(data[c].replace("", np.nan))
        for c in categorical:
            data[c] = data[c].replace("", "(missing)").astype(str)
        return data

    x_train, x_test = frame(train), frame(test)
    y_train, y_test = np.array([r[label] for r in train]), np.array([r[label] for r in test])
    numbers = make_pipeline(SimpleImputer(strategy="mean"), StandardScaler())
    logistic = make_pipeline(
        ColumnTransformer(
            [("numbers", numbers, numeric), ("categories", OneHotEncoder(handle_unknown="ignore"), categorical)]
        ),
        LogisticRegression(max_iter=5000),
    )
    codes = OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=-1, encoded_missing_value=-1)
    # the trees take a column of at most 255 categories as categories, a larger one as its codes' order
    few = [i for i, c in enumerate(categorical) if x_train[c].nunique() <= 250]
    boosted = make_pipeline(
        ColumnTransformer([("numbers", "passthrough", numeric), ("categories", codes, categorical)]),
        HistGradientBoostingClassifier(categorical_features=[len(numeric) + i for i in few] or None, random_state=SEED),
    )
    scores = {}
    for name, model in (("logistic", logistic), ("boosted", boosted)):
        start = time.perf_counter()
        model.fit(x_train, y_train)
        if timings is not None:
            timings[name] = round(time.perf_counter() - start, 2)
        scores[name] = float((model.predict(x_test) == y_test).mean())
    return scores


# --------------------------------------------------------------------------- describing a set


def _words(text: str) -> list[str]:
    """A text's words as the pipeline splits them: lowercased, WORD_FILTERS as spaces."""
    return text.lower().translate(str.maketrans(WORD_FILTERS, " " * len(WORD_FILTERS))).split()


def _class_range(counts: Counter) -> dict:
    return {"class_min": min(counts.values()), "class_max": max(counts.values())}


def describe(folder: Path, kind: str) -> dict:
    """What a made set holds: classes and their counts; for pictures their sizes, modes and how
    many have colour by `pipeline add`'s own test (`images.has_colour`, once laid on their
    ground); for texts the words' count percentiles and the vocabulary."""
    import numpy as np
    from PIL import Image

    from pipeline.data.images import has_colour

    if kind == "tables":
        header, rows = table_rows(folder)
        counts = Counter(r["label"] for r in rows)
        return {"rows": len(rows), "classes": len(counts), "columns": len(header) - 1, **_class_range(counts)}
    if kind == "labelled_texts":
        texts, labels = text_rows(folder)
        counts = Counter(labels)
        lengths = np.array([len(_words(t)) for t in texts])
        return {
            "rows": len(texts),
            "classes": len(counts),
            "class_min": min(counts.values()),
            "class_max": max(counts.values()),
            "words_p50_90_95_99": [int(np.percentile(lengths, q)) for q in (50, 90, 95, 99)],
            "vocabulary": len({w for t in texts for w in _words(t)}),
        }
    splits: dict[str, Counter] = {"train": Counter(), "test": Counter()}
    sizes: Counter[str] = Counter()
    modes: Counter[str] = Counter()
    colour = 0
    for path in sorted(p for p in folder.glob("*/*/*") if p.suffix.lower() in PICTURE_SUFFIXES):
        splits[path.parent.parent.name][path.parent.name] += 1
        with Image.open(path) as image:
            sizes[f"{image.width}x{image.height}"] += 1
            modes[image.mode] += 1
        colour += has_colour(_flattened(path))
    train = splits["train"]
    return {
        "train": sum(train.values()),
        "test": sum(splits["test"].values()),
        "classes": len(train),
        "class_min": min(train.values()),
        "class_max": max(train.values()),
        "test_class_min": min(splits["test"].values()),
        "sizes": dict(sizes.most_common(4)),
        "size_kinds": len(sizes),
        "modes": dict(modes),
        "real_colour": colour,
    }


def _flattened(path: Path):
    """A picture in RGB, a transparent one laid on its ground by the pipeline's own rule (white,
    or black where it would vanish on white), at its own size."""
    from PIL import Image

    from pipeline.data.images import flattened

    with Image.open(path) as image:
        return flattened(image).convert("RGB")


def natural_side(folder: Path) -> int:
    """The side to judge a picture set at: its pictures' largest side, 64 at most."""
    from PIL import Image

    largest = 0
    for path in sorted(folder.glob("train/*/*"))[:: max(1, len(list(folder.glob("train/*/*"))) // 200)]:
        with Image.open(path) as image:
            largest = max(largest, *image.size)
    return min(largest, 64)


def picture_color(folder: Path) -> str:
    """The set's colour for the yardsticks: "rgb" when a picture of a sample has colour by
    `pipeline add`'s own test (`images.has_colour`), else "grey"."""
    from pipeline.data.images import has_colour

    paths = sorted(folder.glob("*/*/*"))
    return "rgb" if any(has_colour(_flattened(path)) for path in paths[:: max(1, len(paths) // 300)]) else "grey"


# --------------------------------------------------------------------------- command line


def _make(s: RealSet, folder: Path) -> tuple[dict, float]:
    """Make a set into a new or empty folder: make()'s counts and its seconds."""
    if folder.exists() and any(folder.iterdir()):
        sys.exit(f"error: {folder} is not empty")
    why = available(s)
    if why:
        sys.exit(f"error: {s.name} cannot be made here: {why}")
    folder.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    counts = s.make(folder)
    return counts, round(time.perf_counter() - start, 1)


def main(argv: Optional[list[str]] = None) -> None:
    """`list`, `make NAME DIR`, `check NAME DIR [--side N] [--reuse]`."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="each set, its kind, size and availability")
    make = sub.add_parser("make", help="make one set into a new folder")
    check = sub.add_parser("check", help="make one set, describe it and run its yardsticks")
    for p in (make, check):
        p.add_argument("name", choices=sorted(SETS))
        p.add_argument("folder", type=Path)
    check.add_argument("--side", type=int, help="pictures' side for the yardsticks (default: natural, 64 at most)")
    check.add_argument("--reuse", action="store_true", help="the folder holds the set already: do not make it")
    args = parser.parse_args(argv)
    if args.command == "list":
        for s in SETS.values():
            why = available(s)
            print(f"{s.name:18} {s.kind:15} {s.size or '-':44} {'available' if why is None else 'needs: ' + why}")
            print(f"{'':18} {s.title}")
        return
    s = SETS[args.name]
    report: dict[str, Any] = {"name": s.name, "kind": s.kind}
    if not (args.command == "check" and args.reuse):
        report["made"], report["make_seconds"] = _make(s, args.folder)
    if args.command == "check":
        report["described"] = describe(args.folder, s.kind)
        timings: dict[str, float] = {}
        if s.kind == "image_folders":
            side = args.side or natural_side(args.folder)
            color = picture_color(args.folder)
            report["yardstick_input"] = f"{side}x{side} {color}"
            report["yardsticks"] = picture_yardsticks(args.folder, side, color, timings)
        elif s.kind == "tables":
            header, rows = table_rows(args.folder)
            train, _, test, _ = split_rows(rows, [r["label"] for r in rows])
            words = [c for c in header if c != "label" and any(_not_number(r[c]) for r in rows)]
            report["yardsticks"] = table_yardsticks(train, test, "label", words, [], timings)
        else:
            x_train, y_train, x_test, y_test = split_rows(*text_rows(args.folder))
            report["yardsticks"] = text_yardsticks(x_train, y_train, x_test, y_test, timings)
        report["fit_seconds"] = timings
    print(json.dumps(report, ensure_ascii=False))


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
