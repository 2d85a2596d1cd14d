"""pipeline/kinds/known.py: every kind registered once, with all it declares found where it
says; and no code outside pipeline/kinds/ names a kind, a form or a template."""

import ast
import dataclasses
import importlib.util

import numpy as np
from support.project import ROOT

from pipeline.config.keys.model_table import MODELS
from pipeline.kinds import image_folders, labelled_texts, tables
from pipeline.kinds.known import FORMS, KINDS, TEMPLATES


def test_each_kind_is_registered_by_its_name_and_its_form():
    assert KINDS == {"labelled_texts": labelled_texts.KIND, "image_folders": image_folders.KIND, "tables": tables.KIND}
    assert FORMS == {"sequences": labelled_texts.KIND, "images": image_folders.KIND, "table_rows": tables.KIND}
    assert TEMPLATES == {
        "image_folders": "image_folders",
        "labelled_texts": "labelled_texts",
        "photos": "image_folders",
        "tables": "tables",
    }


def _functions(module: str) -> set[str]:
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin, module
    return {n.name for n in ast.parse(open(spec.origin).read()).body if isinstance(n, ast.FunctionDef)}


def _classes(module: str) -> set[str]:
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin, module
    return {n.name for n in ast.parse(open(spec.origin).read()).body if isinstance(n, ast.ClassDef)}


def test_what_each_kind_names_is_there_without_importing_it():
    """The reader modules, the served requests' class and the table of models, read from the
    source (no NumPy, Pillow or MLflow imported to say so)."""
    for name, kind in KINDS.items():
        assert kind.name == name and kind.help and kind.templates[0] == name
        for reader in kind.readers.values():
            assert {"prepare"} <= _functions(reader.module), reader.module
            assert getattr(reader.preprocess, "__dataclass_fields__", None), reader
        module, _, cls = kind.served.partition(":")
        assert cls in _classes(module), kind.served
        assert MODELS[kind.models], kind.models
        assert np.dtype(kind.dtype).kind in "iuf"


def test_the_selftest_samples_are_of_the_kinds_form():
    rng = np.random.RandomState(0)

    class Texts:
        num_words, max_len, padding, truncating = 50, 7, "post", "pre"

    class Pictures:
        image_size, color, reader = 9, "rgb", "folders"

    x, facts, assets = labelled_texts.samples(Texts(), 4, rng)
    assert x.shape == (4, 7) and x.dtype == np.int32 and 1 <= x.min() and x.max() < 50
    encoding = labelled_texts.TextEncoding(labelled_texts.INDEX_FROM, "post", 0, "pre")
    name = labelled_texts.WORD_INDEX_NAME
    assert facts == labelled_texts.LabelledTextsFacts(50, 7, 7.0, 7, 0.0, encoding, word_index=name)
    # a word for each id from the first word's (index_from + 1) to the last, all different
    index = assets[name]
    assert sorted(index.values()) == list(range(1, 50 - labelled_texts.INDEX_FROM))
    assert len(set(index)) == len(index) and all(word.isalpha() for word in index)
    x, pictures, assets = image_folders.samples(Pictures(), 3, rng)
    assert assets == {}
    assert x.shape == (3, 9, 9, 3) and x.dtype == np.uint8
    assert pictures == image_folders.ImageFoldersFacts(9, "rgb", "folders", images_sha256=None)


def test_each_kind_names_its_facts_a_frozen_dataclass_of_its_module():
    """The class of what a prepared folder's description holds of the kind's samples."""
    for kind in KINDS.values():
        assert dataclasses.is_dataclass(kind.facts) and vars(kind.facts)["__dataclass_params__"].frozen, kind.name
        assert kind.facts.__module__ == f"pipeline.kinds.{kind.name}"


def _named(path) -> list[str]:
    names = {*KINDS, *FORMS, *TEMPLATES}
    tree = ast.parse(path.read_text())
    return [
        f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names
    ]


def test_no_code_outside_the_kinds_names_a_kind_a_form_or_a_template():
    """A string that is one of their names, anywhere in pipeline/ or stages/ but pipeline/kinds/
    (a docstring or a help text that mentions one among other words is no such string)."""
    files = [*(ROOT / "pipeline").rglob("*.py"), *(ROOT / "stages").glob("*.py")]
    assert len(files) > 40
    found = [line for path in files if "kinds" not in path.relative_to(ROOT).parts for line in _named(path)]
    assert found == []
    # the check finds what it looks for
    assert _named(ROOT / "pipeline" / "kinds" / "image_folders.py")
