"""pipeline.runtime.imports: a `pipeline` process imports TensorFlow without Keras' imports of
scikit-learn (for its wrappers) and matplotlib (for its image galleries), and both stay
importable for anything else."""

from support.processes import child_json, run_python

# `pipeline devices` imports TensorFlow (and so Keras) in the command's own process; what
# that process holds is read after it.
DEVICES_THEN_PROBE = """
import json, sys
from pipeline.cli import cli
cli.main(["-q", "devices", "--json"], standalone_mode=False)
import keras
held = sorted(m for m in ("sklearn", "scipy.stats", "matplotlib") if m in sys.modules)
wrapper = [c.__module__ for c in keras.wrappers.SKLearnClassifier.__mro__]
gallery = keras.src.visualization.plot_image_gallery.plt
import sklearn.base
from pipeline.training import plots
import numpy as np
plots.confusion(np.eye(2, dtype=int), sys.argv[1], "probe", ["a", "b"])
print(json.dumps({"held": held, "wrapper": wrapper, "gallery": gallery, "sklearn": sklearn.base.__name__,
                  "pyplot": sys.modules["matplotlib.pyplot"].__name__}))
"""


def test_a_pipeline_command_imports_tensorflow_without_keras_extras_and_they_still_import(tmp_path):
    done = run_python(DEVICES_THEN_PROBE, args=[tmp_path / "c.png"])
    assert done.returncode == 0, done.stderr
    report = child_json(done, last_line=True)
    assert report["held"] == []  # TensorFlow and Keras imported; scikit-learn, SciPy's stats, matplotlib not
    assert "sklearn.base" not in report["wrapper"]  # Keras' wrappers as where scikit-learn is missing
    assert report["gallery"] is None  # Keras' galleries as where matplotlib is missing
    # imported afterwards by anyone else, they are there: the stages' own plots draw
    assert (report["sklearn"], report["pyplot"]) == ("sklearn.base", "matplotlib.pyplot")
    assert (tmp_path / "c.png").read_bytes().startswith(b"\x89PNG")


def test_installing_the_finder_twice_adds_it_once():
    probe = (
        "import sys; from pipeline.runtime import imports; imports.skip_keras_extras(); imports.skip_keras_extras(); "
        "print(sum(isinstance(f, imports._KerasWithoutExtras) for f in sys.meta_path))"
    )
    assert run_python(probe).stdout.strip() == "1"
