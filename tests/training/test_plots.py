import numpy as np
from PIL import Image

from pipeline.training import plots


def test_confusion_png_is_written_its_classes_named(tmp_path):
    def drawn(names, name):
        plots.confusion(np.eye(3, dtype=int) * 5, tmp_path / name, "t", names)
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        with Image.open(tmp_path / name) as img:
            return np.asarray(img.convert("L"))

    topics = drawn(["earn", "acq", "crude"], "a.png")
    assert (topics == drawn(["earn", "acq", "crude"], "b.png")).all()
    # the names alone differ, so do the pictures: beside the rows and under the columns
    other = drawn(["gold", "tea", "ship"], "c.png")
    assert topics.shape == other.shape and (topics != other).any()


def test_learning_curves_png_has_both_panels(tmp_path):
    history = [
        {"epoch": e, "loss": 2.0 / e, "val_loss": 2.2 / e, "accuracy": 0.3 * e, "val_accuracy": 0.28 * e}
        for e in (1, 2, 3)
    ]
    path = tmp_path / "curves.png"
    plots.learning_curves(history, path, "reuters: reuters-fit-1rep-float32")
    with Image.open(path) as img:
        assert img.format == "PNG" and img.size == (1000, 400)
        # two panels with lines: far from a blank canvas
        assert len(img.convert("RGB").getcolors(maxcolors=1 << 20)) > 50
