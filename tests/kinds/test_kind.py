"""pipeline/kinds/kind.py: a kind's modules are imported only when asked, and the shared keys'
declarations."""

import subprocess
import sys

from support.project import ROOT

from pipeline.kinds import kind
from pipeline.kinds.known import KINDS


def test_reading_the_kinds_imports_neither_numpy_nor_mlflow():
    code = (
        "import sys\n"
        "from pipeline.kinds.known import KINDS\n"
        "from pipeline.config.loading import datasets\n"
        "print(sorted(m for m in ('numpy', 'PIL', 'mlflow', 'tensorflow') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_reader_module_and_a_served_form_are_imported_when_asked():
    texts = KINDS["labelled_texts"]
    assert texts.reader_module("table").__name__ == "pipeline.data.texts"
    served = texts.served_form()
    assert type(served).__name__ == "Texts" and served is not texts.served_form()  # a new one each time


def test_the_shared_keys_carry_their_meaning():
    assert "validation" in kind.validation_split().metadata["help"]
    assert kind.reader_key("x: y.").metadata["help"] == "How the download folder is read: x: y."
    assert "class by class" in kind.stratify("a", "b", "c").metadata["help"]
