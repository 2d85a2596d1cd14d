"""What a `pipeline` process leaves out when it imports TensorFlow.

`import tensorflow` imports Keras, and Keras imports scikit-learn (and through it SciPy's
statistics) whenever it is installed, for its scikit-learn wrappers (`keras.wrappers`), which
no stage uses. MLflow installs scikit-learn, so every `pipeline train` and `pipeline evaluate`
paid about 1.7 s of its start for it (README, Measured figures). `skip_keras_sklearn()` makes
that one import fail as it does where scikit-learn is missing: Keras then defines its wrappers
without it, as it is written to. Anything else that imports scikit-learn still gets it.
"""

from __future__ import annotations

import importlib.abc
import sys

# the modules of Keras that import scikit-learn at import time, for its wrappers only
KERAS_SKLEARN_IMPORTERS = ("keras.src.wrappers.",)


def _importer() -> str:
    """The name of the module whose code runs the import being resolved."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename.startswith("<frozen importlib"):
        frame = frame.f_back
    return frame.f_globals.get("__name__", "") if frame is not None else ""


class _KerasWithoutSklearn(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if (name == "sklearn" or name.startswith("sklearn.")) and _importer().startswith(KERAS_SKLEARN_IMPORTERS):
            raise ModuleNotFoundError(f"No module named {name!r} (not imported for Keras' wrappers)", name=name)
        return None


def skip_keras_sklearn() -> None:
    """From now on, Keras' wrappers import as if scikit-learn were not installed. Call before
    TensorFlow is imported."""
    if not any(isinstance(finder, _KerasWithoutSklearn) for finder in sys.meta_path):
        sys.meta_path.insert(0, _KerasWithoutSklearn())
