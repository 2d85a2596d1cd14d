"""What a `pipeline` process leaves out when it imports TensorFlow.

`import tensorflow` imports Keras, and Keras imports two optional packages whenever they are
installed, for parts that no stage uses: scikit-learn (and through it SciPy's statistics) for
its scikit-learn wrappers (`keras.wrappers`), and matplotlib's pyplot for its image-gallery
plots (`keras.visualization`). MLflow installs scikit-learn and the project installs matplotlib,
so every `pipeline` command that imports TensorFlow paid about 3 s of its start for them
(docs/benchmarks.md). `skip_keras_extras()` makes those imports fail as they do where the
package is missing: Keras then defines those parts without it, as it is written to. Anything
else that imports them (the stages' own plots: `pipeline/training/plots.py`) still gets them.
"""

from __future__ import annotations

import importlib.abc
import sys
from types import FrameType
from typing import Optional

# package -> the modules of Keras that import it at import time, for a part no stage uses
KERAS_EXTRAS = {"sklearn": ("keras.src.wrappers.",), "matplotlib": ("keras.src.visualization.",)}


def _importer() -> str:
    """The name of the module whose code runs the import being resolved."""
    frame: Optional[FrameType] = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename.startswith("<frozen importlib"):
        frame = frame.f_back
    return frame.f_globals.get("__name__", "") if frame is not None else ""


class _KerasWithoutExtras(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        importers = KERAS_EXTRAS.get(name.partition(".")[0])
        if importers and _importer().startswith(importers):
            raise ModuleNotFoundError(f"No module named {name!r} (not imported for Keras)", name=name)
        return None


def skip_keras_extras() -> None:
    """From now on, Keras imports as if scikit-learn and matplotlib were not installed. Call
    before TensorFlow is imported."""
    if not any(isinstance(finder, _KerasWithoutExtras) for finder in sys.meta_path):
        sys.meta_path.insert(0, _KerasWithoutExtras())
