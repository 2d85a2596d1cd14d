"""What `pipeline add`'s shipped defaults give on small real datasets the tests never see,
against simple yardsticks; and Reuters' mlp model against its default conv1d.

`images`: two small real sets of pictures, written as PNG image folders (train/ and test/ of a
folder per class) in a temporary folder:

- scikit-learn's bundled digits (1,797 pictures of 8x8, values 0-16 scaled to 0-255), split
  80/20 class by class (scikit-learn's `train_test_split`, stratified, random_state 0);
- MNIST, 100 pictures of each digit from its training set and 100 of each from its test set
  (drawn with seed 0), from the MNIST PNG archive (`--mnist-archive`; by default
  mnist_png.tar.gz under PIPELINE_DATA_MIRROR's folder when that is a file:// URL).

For each set, a clone of this checkout (`git clone`: its committed code, params.yaml and
dvc.yaml) declares it with `pipeline add NAME --kind image_folders --url file:///...` (the
folder itself: the download stage copies it whole) and runs `dvc repro evaluate@NAME`, as a
user would: the four stages with `add.image_folders`' defaults, MLflow runs to a throw-away
store. It reads the test accuracy (reports/NAME/metrics.json) and the train stage's
train_seconds (reports/NAME/measurements.json), and times the whole `dvc repro`. The
yardsticks, on the same pictures and split: scikit-learn's SVC (RBF kernel, its defaults) and
LogisticRegression(max_iter=5000), on the raw pixels scaled to [0, 1].

`reuters`: the train and evaluate stages of Reuters (`--reuters-data`, prepared by `dvc repro
preprocess@reuters`) with the shipped params (conv1d) and with `-S train.reuters.model=mlp`
alone, alternating (conv1d, mlp, conv1d, mlp, ...; `--reuters-runs` of each), each stage its
own process: test accuracy, the train stage's train_seconds and its epochs trained (train.json).

    python benchmarks/new_datasets.py [--only images|reuters] [--mnist-archive PATH]
        [--reuters-data data/prepared/reuters] [--reuters-runs 2]

It prints the CPU (lscpu's model name, and whether it has AVX-512F) first, then one table.
About 5 minutes on 2 cores (the images 4 of them, the four Reuters runs the rest). Needs
scikit-learn, which is not a dependency of the project (`pip install scikit-learn`).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import harness
from harness import ROOT

MIRROR_ENV = "PIPELINE_DATA_MIRROR"
MNIST_PER_CLASS = 100
REUTERS_MODELS = ("conv1d", "mlp")


def cpu_lines() -> list[str]:
    """lscpu's model name, and whether the CPU has AVX-512F (lscpu's flags)."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return ["CPU: lscpu not available", harness.host_line()]
    fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    model = fields.get("Model name", "?").strip()
    avx512f = "avx512f" in fields.get("Flags", "").split()
    return [f"CPU: {model}; avx512f: {'yes' if avx512f else 'no'}", harness.host_line()]


# --------------------------------------------------------------------------- the image sets


def save_grey(pixels, path: Path) -> None:
    """A 2-D uint8 array as a greyscale PNG."""
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(pixels, mode="L").save(path, format="PNG")


def write_digits(folder: Path) -> dict[str, int]:
    """scikit-learn's digits as image folders, folder/{train,test}/<digit>/NNNN.png: 8x8, values
    0-16 scaled to 0-255, a stratified 80/20 split (random_state 0). The pictures per split."""
    import numpy as np

    # scikit-learn is not a dependency of the project: the benchmark alone needs it
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    pixels = np.rint(digits.images * 255 / 16).astype(np.uint8)
    indices = np.arange(len(pixels))
    train, test = train_test_split(indices, test_size=0.2, stratify=digits.target, random_state=0)
    for split, chosen in (("train", train), ("test", test)):
        for i in chosen:
            save_grey(pixels[i], folder / split / str(digits.target[i]) / f"{i:04d}.png")
    return {"train": len(train), "test": len(test)}


def write_mnist_subset(archive: Path, folder: Path, per_class: int = MNIST_PER_CLASS, seed: int = 0) -> dict[str, int]:
    """`per_class` pictures of each digit of MNIST's training set and as many of its test set,
    drawn with `seed` from the PNG archive's members (mnist_png/{training,testing}/<digit>/<n>.png),
    as folder/{train,test}/<digit>/<n>.png. The pictures per split."""
    splits = {"training": "train", "testing": "test"}
    members: dict[tuple[str, str], list[str]] = {}
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            parts = Path(member.name).parts
            if member.isfile() and len(parts) >= 3 and parts[-3] in splits and parts[-1].endswith(".png"):
                members.setdefault((splits[parts[-3]], parts[-2]), []).append(member.name)
    if not members:
        sys.exit(f"error: {archive}: no member like mnist_png/training/<digit>/<n>.png")
    rng = random.Random(seed)
    chosen = {key: rng.sample(sorted(names), per_class) for key, names in sorted(members.items())}
    wanted = {name: key for key, names in chosen.items() for name in names}
    with tarfile.open(archive) as tar:
        for member in tar:
            if member.name in wanted:
                split, digit = wanted[member.name]
                target = folder / split / digit / Path(member.name).name
                target.parent.mkdir(parents=True, exist_ok=True)
                handle = tar.extractfile(member)
                if handle is None:
                    raise SystemExit(f"{archive}: {member.name} is no file")
                target.write_bytes(handle.read())
    return {split: sum(len(n) for (s, _), n in chosen.items() if s == split) for split in ("train", "test")}


def read_folders(folder: Path):
    """The pictures of image folders as (x_train, y_train, x_test, y_test): each picture's raw
    pixels scaled to [0, 1], flattened; its class folder's name as its label."""
    import numpy as np
    from PIL import Image

    arrays = []
    for split in ("train", "test"):
        paths = sorted(folder.glob(f"{split}/*/*.png"))
        x = np.stack([np.asarray(Image.open(p).convert("L"), dtype=np.float32).ravel() / 255 for p in paths])
        arrays += [x, np.array([p.parent.name for p in paths])]
    return tuple(arrays)


def yardsticks(folder: Path) -> dict[str, float]:
    """The test accuracy of an SVM (RBF kernel, scikit-learn's defaults) and of a logistic
    regression on the raw pixels, trained on the training split."""
    # scikit-learn is not a dependency of the project: the benchmark alone needs it
    from sklearn.linear_model import LogisticRegression
    from sklearn.svm import SVC

    x_train, y_train, x_test, y_test = read_folders(folder)
    found = {}
    for name, model in (("svc", SVC()), ("logistic", LogisticRegression(max_iter=5000))):
        found[name] = float((model.fit(x_train, y_train).predict(x_test) == y_test).mean())
    return found


def add_and_repro(name: str, folder: Path, tmp: Path) -> dict[str, float]:
    """`pipeline add NAME --kind image_folders --url file://FOLDER` in a clone of this checkout,
    then `dvc repro evaluate@NAME`: its test accuracy, the train stage's train_seconds, epochs
    trained and best epoch, and the wall seconds of the whole `dvc repro`."""
    project = tmp / f"project-{name}"
    env = harness.dvc_env()
    env.pop(MIRROR_ENV, None)  # a mirror would look the folder up under it by its base name
    env["MLFLOW_TRACKING_URI"] = f"sqlite:///{tmp / 'mlflow.db'}"
    harness.run(["git", "clone", "-q", str(ROOT), str(project)], cwd=tmp, env=env)
    add = harness.pipeline_argv("add", name, "--kind", "image_folders", "--url", folder.resolve().as_uri(), quiet=False)
    harness.run(add, cwd=project, env=env)
    run = harness.run([sys.executable, "-m", "dvc", "repro", f"evaluate@{name}"], cwd=project, env=env)
    reports = project / "reports" / name
    metrics = json.loads((reports / "metrics.json").read_text())
    figures = harness.train_figures(reports)  # train.json's and measurements.json's
    return {
        "test_accuracy": metrics["test_accuracy"],
        "train_seconds": figures["train_seconds"],
        "epochs_trained": figures["epochs_trained"],
        "best_epoch": figures.get("best_epoch"),
        "repro_seconds": run.seconds,
    }


def default_mnist_archive() -> Path | None:
    """mnist_png.tar.gz under PIPELINE_DATA_MIRROR's folder, when that is a file:// URL."""
    import urllib.parse
    import urllib.request

    parsed = urllib.parse.urlparse(os.environ.get(MIRROR_ENV, ""))
    if parsed.scheme != "file":
        return None
    return Path(urllib.request.url2pathname(parsed.path)) / "mnist_png.tar.gz"


def images_main(opts, tmp: Path) -> list[dict]:
    """Each image set: written, its yardsticks, and `pipeline add` + `dvc repro` on it."""
    sets = (
        ("digits", "scikit-learn digits, 8x8", write_digits),
        ("mnist_1k", "MNIST, 100 a class", lambda folder: write_mnist_subset(opts.mnist_archive, folder)),
    )
    rows = []
    for name, title, write in sets:
        folder = tmp / "sets" / name
        counts = write(folder)
        print(f"{title}: {counts['train']:,} train, {counts['test']:,} test pictures in {folder}", flush=True)
        row = {"set": title, **counts, **yardsticks(folder)}
        row.update(add_and_repro(name, folder, tmp))
        print(
            f"  pipeline add defaults: test accuracy {row['test_accuracy']:.4f}, {row['epochs_trained']} epochs "
            f"(best {row['best_epoch']}), train {row['train_seconds']:.0f} s, dvc repro {row['repro_seconds']:.0f} s; "
            f"SVC {row['svc']:.4f}, logistic regression {row['logistic']:.4f}",
            flush=True,
        )
        rows.append(row)
    return rows


# --------------------------------------------------------------------------- Reuters: mlp against conv1d


def reuters_run(model: str, data: Path, work: Path, env: dict) -> dict:
    """The train and evaluate stages of Reuters with `train.reuters.model=MODEL` (the shipped
    params otherwise), each its own process, everything written in `work`."""
    work.mkdir(parents=True)
    overrides = [] if model == harness.load_params("reuters").train.model else [f"train.reuters.model={model}"]
    harness.write_params(work, overrides)
    out = work / "out"
    harness.run(harness.train_argv("reuters", data, out, quiet=False), cwd=work, env=env)
    harness.run(harness.evaluate_argv("reuters", data, out / "model", out, quiet=False), cwd=work, env=env)
    figures = harness.train_figures(out)
    metrics = json.loads((out / "metrics.json").read_text())
    return {
        "model": model,
        "test_accuracy": metrics["test_accuracy"],
        "train_seconds": figures["train_seconds"],
        "epochs_trained": figures["epochs_trained"],
        "best_epoch": figures.get("best_epoch"),
    }


def reuters_main(opts, tmp: Path) -> list[dict]:
    """conv1d and mlp in turn, `opts.reuters_runs` runs of each."""
    data = opts.reuters_data.resolve()
    env = harness.mlflow_env(tmp)
    env.pop(MIRROR_ENV, None)
    rows = []
    for run in range(1, opts.reuters_runs + 1):
        for model in REUTERS_MODELS:
            row = {"run": run, **reuters_run(model, data, tmp / f"reuters-{model}-{run}", env)}
            print(
                f"Reuters {model} run {run}: test accuracy {row['test_accuracy']:.4f}, "
                f"{row['epochs_trained']} epochs (best {row['best_epoch']}), train {row['train_seconds']:.1f} s",
                flush=True,
            )
            rows.append(row)
    return rows


# --------------------------------------------------------------------------- the table


def print_table(images: list[dict], reuters: list[dict]) -> None:
    if images:
        print()
        print(
            f"{'set':<28}{'pictures (train/test)':>23}{'add defaults acc':>18}{'train s':>9}{'epochs':>8}"
            f"{'repro s':>9}{'SVC':>8}{'logistic':>10}"
        )
        for r in images:
            pictures = f"{r['train']:,} / {r['test']:,}"
            print(
                f"{r['set']:<28}{pictures:>23}{r['test_accuracy']:>18.4f}"
                f"{r['train_seconds']:>9.0f}{r['epochs_trained']:>8}{r['repro_seconds']:>9.0f}"
                f"{r['svc']:>8.4f}{r['logistic']:>10.4f}"
            )
    if reuters:
        print()
        print(f"{'Reuters model':<34}{'run':>5}{'test acc':>10}{'train s':>9}{'epochs':>8}{'best':>6}")
        for r in reuters:
            model = r["model"] + (" (-S train.reuters.model=mlp)" if r["model"] == "mlp" else " (shipped)")
            print(
                f"{model:<34}{r['run']:>5}{r['test_accuracy']:>10.4f}{r['train_seconds']:>9.1f}"
                f"{r['epochs_trained']:>8}{r['best_epoch'] if r['best_epoch'] is not None else '-':>6}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    parser.add_argument("--only", choices=("images", "reuters"), help="Run one part alone [default: both].")
    parser.add_argument(
        "--mnist-archive",
        type=Path,
        default=default_mnist_archive(),
        help=f"The MNIST PNG archive [default: mnist_png.tar.gz under {MIRROR_ENV}'s file:// folder].",
    )
    parser.add_argument(
        "--reuters-data", type=Path, default=ROOT / "data/prepared/reuters", help="Prepared Reuters [%(default)s]."
    )
    parser.add_argument("--reuters-runs", type=harness.positive_int, default=2, help="Runs of each model [2].")
    opts = parser.parse_args()
    if opts.only != "reuters" and (opts.mnist_archive is None or not opts.mnist_archive.is_file()):
        sys.exit(f"error: the MNIST PNG archive {opts.mnist_archive or ''}: not found; pass --mnist-archive PATH")
    if opts.only != "images" and not (opts.reuters_data / "stats.json").is_file():
        sys.exit(f"error: {opts.reuters_data}: no prepared Reuters; run `dvc repro preprocess@reuters` first")
    print("\n".join(cpu_lines()), flush=True)
    tmp = Path(tempfile.mkdtemp(prefix="bench-new-datasets-"))
    try:
        images = images_main(opts, tmp) if opts.only != "reuters" else []
        reuters = reuters_main(opts, tmp) if opts.only != "images" else []
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print_table(images, reuters)


if __name__ == "__main__":
    main()
