"""pipeline.imports: a `pipeline` process imports TensorFlow without Keras' scikit-learn
wrappers' import of scikit-learn, and scikit-learn stays importable for anything else."""

import json

from helpers import run_python

# `pipeline devices` imports TensorFlow (and so Keras) in the command's own process; what
# that process holds is read after it.
DEVICES_THEN_PROBE = """
import json, sys
from pipeline.cli import cli
cli.main(["-q", "devices", "--json"], standalone_mode=False)
import keras
held = sorted(m for m in ("sklearn", "scipy.stats") if m in sys.modules)
wrapper = [c.__module__ for c in keras.wrappers.SKLearnClassifier.__mro__]
import sklearn.base
print(json.dumps({"held": held, "wrapper": wrapper, "sklearn": sklearn.base.__name__}))
"""


def test_a_pipeline_command_imports_tensorflow_without_sklearn_and_sklearn_still_imports():
    done = run_python(DEVICES_THEN_PROBE)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["held"] == []  # TensorFlow and Keras imported, scikit-learn (and SciPy's stats) not
    assert "sklearn.base" not in report["wrapper"]  # Keras' wrappers as where scikit-learn is missing
    assert report["sklearn"] == "sklearn.base"  # imported afterwards by anyone else, it is there


def test_installing_the_finder_twice_adds_it_once():
    probe = ("import sys; from pipeline import imports; imports.skip_keras_sklearn(); imports.skip_keras_sklearn(); "
             "print(sum(isinstance(f, imports._KerasWithoutSklearn) for f in sys.meta_path))")
    assert run_python(probe).stdout.strip() == "1"
