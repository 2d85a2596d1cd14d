"""benchmarks/memory.py's scaling mode, without a training: its command line, and the image
folders it generates (the layout docs/own-data.md describes, 64x64 RGB PNG, every class in both
splits)."""

import subprocess
import sys

from PIL import Image
from support.processes import subprocess_env
from support.project import ROOT

BENCHMARKS = ROOT / "benchmarks"


def test_the_scaling_mode_is_on_the_command_line():
    result = subprocess.run(
        [sys.executable, str(BENCHMARKS / "memory.py"), "scaling", "--help"],
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "--sizes" in result.stdout and "-S KEY=VALUE" in result.stdout
    bad = subprocess.run(
        [sys.executable, str(BENCHMARKS / "memory.py"), "scaling", "--sizes", "40,0"],
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=120,
    )
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.splitlines()[-1].endswith("expected positive integers separated by commas, got '40,0'")


def test_the_generated_pictures_are_image_folders_of_ten_classes(tmp_path):
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import memory
    finally:
        sys.path.remove(str(BENCHMARKS))
    assert memory.write_pictures(tmp_path, 60) == {"train": 48, "test": 12}
    for split, per_class in (("train", {4, 5}), ("test", {1, 2})):
        classes = sorted(p.name for p in (tmp_path / split).iterdir())
        assert classes == sorted(memory.CLASSES) and len(classes) == 10
        assert {len(list((tmp_path / split / c).glob("*.png"))) for c in classes} == per_class
    with Image.open(next((tmp_path / "train").rglob("*.png"))) as img:
        assert (img.format, img.mode, img.size) == ("PNG", "RGB", (64, 64))
