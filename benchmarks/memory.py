"""Peak memory of the stages: of training against the number of epochs, and of each stage
against the size of the data. Neither should grow much.

`DATASET` (reuters, mnist): runs the real train stage (`python -m pipeline train`) once per
epoch count, each in its own process with a throw-away MLflow store, and prints each run's peak
RSS (as the stage reports it in its summary, and as the operating system counts the whole
process) and the growth per added epoch.

    python benchmarks/memory.py DATASET [--epochs 1,2,4] [--data data/prepared/DATASET] [-S key=value ...]

`scaling`: for each size, generates image folders of that many pictures (64x64 RGB PNG, ten
classes of coloured shapes on a noisy ground, a fifth of them in test/), declares them as a
dataset of a throw-away project (the params file's sections and dvc.yaml's foreach, as
docs/own-data.md does), and runs its preprocess stage, one epoch of training and evaluate, each
its own `python -m pipeline` process; then prints each stage's whole-process peak RSS at each
size (and the stage's own figure, from its last line), and the ratio of the largest size's to
the smallest's.

    python benchmarks/memory.py scaling [--sizes 4000,32000] [--keep DIR] [-S key=value ...]

`-S` there sets the generated dataset's params, named `pictures` (e.g.
`-S train.pictures.batch_size_per_replica=64`).
"""

from __future__ import annotations

import argparse
import copy
import os
import random
import re
import shutil
import tempfile
from pathlib import Path

import harness
from harness import ROOT

NAME = "pictures"  # the generated dataset's name in the throw-away project
SIDE = 64
SHAPES = ("circle", "square", "triangle", "diamond", "bar")
COLOURS = {"warm": ((170, 255), (0, 90), (0, 90)), "cool": ((0, 90), (60, 200), (170, 255))}
CLASSES = tuple(f"{shape}-{colour}" for colour in COLOURS for shape in SHAPES)  # ten
STAGE_LINE = re.compile(r": done in [0-9.]+ s, peak memory ([0-9,]+) MB")


def train(work: Path, dataset: str, data: Path, env: dict) -> tuple[float, float, dict]:
    """One train stage run: (wall seconds, whole-process peak RSS in MiB, its results and
    measurements)."""
    run = harness.run(harness.train_argv(dataset, data, work), cwd=work, env=env)
    return run.seconds, run.peak_mb, harness.train_figures(work)


def epochs_main(opts) -> None:
    data = opts.data or ROOT / "data" / "prepared" / opts.dataset
    harness.load_params(opts.dataset, opts.overrides)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        env = harness.mlflow_env(tmp)
        for epochs in opts.epochs:
            work = Path(tmp) / f"epochs-{epochs}"
            work.mkdir()
            harness.write_params(work, [*opts.overrides, f"train.{opts.dataset}.epochs={epochs}"])
            rows.append((epochs, *train(work, opts.dataset, data, env)))
    print(f"{opts.dataset}: train stage peak memory against epochs ({os.cpu_count()} CPUs)")
    print(f"{'epochs':>6}{'wall s':>9}{'stage peak MiB':>16}{'process peak MiB':>18}{'val acc':>9}")
    for epochs, seconds, peak, summary in rows:
        print(
            f"{epochs:>6}{seconds:>9.1f}{summary['peak_rss_mb']:>16,.0f}{peak:>18,.0f}"
            f"{summary['final_val_accuracy']:>9.4f}"
        )
    (first, _, peak_first, _), (last, _, peak_last, _) = rows[0], rows[-1]
    if last > first:
        print(f"growth: {(peak_last - peak_first) / (last - first):+,.1f} MiB per added epoch (process peak)")


# --------------------------------------------------------------------------- scaling with the data


def picture(label: str, rng: random.Random):
    """One SIDE x SIDE RGB picture of class `label`: its shape in a shade of its colour family,
    any place and size, on a light ground with noise."""
    from PIL import Image, ImageDraw

    shape, colour = label.split("-")
    ground = Image.effect_noise((SIDE, SIDE), rng.uniform(10, 40)).convert("RGB")
    img = Image.blend(ground, Image.new("RGB", (SIDE, SIDE), tuple(rng.randint(190, 255) for _ in range(3))), 0.7)
    draw = ImageDraw.Draw(img)
    size = rng.randint(SIDE // 3, SIDE * 3 // 4)
    x, y = rng.randint(0, SIDE - size), rng.randint(0, SIDE - size)
    fill = tuple(rng.randint(low, high) for low, high in COLOURS[colour])
    if shape == "circle":
        draw.ellipse((x, y, x + size, y + size), fill=fill)
    elif shape == "square":
        draw.rectangle((x, y, x + size, y + size), fill=fill)
    elif shape == "triangle":
        draw.polygon([(x, y + size), (x + size, y + size), (x + size // 2, y)], fill=fill)
    elif shape == "diamond":
        half = size // 2
        draw.polygon([(x + half, y), (x + size, y + half), (x + half, y + size), (x, y + half)], fill=fill)
    else:
        draw.rectangle((x, y + size // 3, x + size, y + 2 * size // 3), fill=fill)
    return img


def write_pictures(folder: Path, count: int, seed: int = 1) -> dict[str, int]:
    """`count` pictures as image folders, folder/train/<class>/NNNNN.png and folder/test/...:
    the classes in turn, a fifth of them (at least one a class) in test. One picture in memory
    at a time. Returns the pictures per split."""
    rng = random.Random(seed)
    test = max(len(CLASSES), count // 5)
    written = {"train": 0, "test": 0}
    for i in range(count):
        split = "test" if i < test else "train"
        label = CLASSES[i % len(CLASSES)]
        path = folder / split / label / f"{i:05d}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        picture(label, rng).save(path, format="PNG")
        written[split] += 1
    return written


def declare(project: Path, raw: Path, overrides: list[str]) -> None:
    """A throw-away project holding the dataset NAME, declared as docs/own-data.md does: a
    section under each of the params file's stages (MNIST's, for pictures of 64x64 RGB read by
    the plain folders reader, one epoch of MobileNetV2 at 32x32) and its name in each foreach of
    dvc.yaml; then `overrides`, checked as the stages check them."""
    from pipeline.config.commands.params_doc import format_params
    from pipeline.config.loading.loader import read_yaml

    params = read_yaml(ROOT / "params.yaml")
    for stage, sections in params.items():
        if stage != "add":  # the templates of `pipeline add`, no dataset's
            sections[NAME] = copy.deepcopy(sections["mnist"])
    params["download"][NAME]["files"] = [{"url": raw.resolve().as_uri(), "sha256": None}]
    params["preprocess"][NAME].update(reader="folders", image_size=SIDE, color="rgb", images_sha256=None)
    params["train"][NAME].update(model="mobilenet_v2", epochs=1, lr_decay_epochs=[])
    params["train"][NAME]["mobilenet_v2"]["img_size"] = 32
    (project / "params.yaml").write_text(format_params(params))
    text = (ROOT / "dvc.yaml").read_text()
    (project / "dvc.yaml").write_text(text.replace("foreach: [reuters, mnist]", f"foreach: [reuters, mnist, {NAME}]"))
    harness.write_params(project, overrides, source=None)


def stage_runs(project: Path, env: dict) -> dict[str, harness.Measured]:
    """preprocess, train and evaluate of NAME in `project`, each a measured process."""
    prepared, out = project / "prepared", project / "out"
    out.mkdir()
    argvs = {
        "preprocess": harness.preprocess_argv(NAME, project / "raw", prepared, quiet=False),
        "train": harness.train_argv(NAME, prepared, out, quiet=False),
        "evaluate": harness.evaluate_argv(NAME, prepared, out / "model", out, quiet=False),
    }
    return {stage: harness.run(argv, cwd=project, env=env) for stage, argv in argvs.items()}


def stage_peak(run: harness.Measured) -> str:
    """The stage's own peak memory figure, from its last line on stderr ('-' without one)."""
    found = STAGE_LINE.findall(run.err)
    return found[-1] if found else "-"


def scaling_main(opts) -> None:
    tmp = tempfile.mkdtemp(prefix="bench-memory-scaling-")
    root = Path(opts.keep).resolve() if opts.keep else Path(tmp)
    results: dict[int, dict[str, harness.Measured]] = {}
    try:
        env = harness.mlflow_env(tmp)
        for size in opts.sizes:
            project = root / f"size-{size}"
            project.mkdir(parents=True)
            written = write_pictures(project / "raw", size, seed=opts.seed)
            declare(project, project / "raw", opts.overrides)
            print(
                f"{size:,} pictures ({written['train']:,} train, {written['test']:,} test, {len(CLASSES)} classes, "
                f"{SIDE}x{SIDE} RGB PNG) in {project}",
                flush=True,
            )
            results[size] = stage_runs(project, env)
            if not opts.keep:
                shutil.rmtree(project)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    small, large = opts.sizes[0], opts.sizes[-1]
    print(f"{NAME}: peak memory of each stage against the pictures ({os.cpu_count()} CPUs; MiB, whole process)")
    header = f"{'stage':<12}" + "".join(f"{f'peak MB at {size:,}':>18}" for size in opts.sizes)
    print(header + (f"{'ratio':>8}" if large != small else "") + f"{'  stage says MB':>16}")
    for stage in ("preprocess", "train", "evaluate"):
        peaks = [results[size][stage].peak_mb for size in opts.sizes]
        line = f"{stage:<12}" + "".join(f"{peak:>18,.0f}" for peak in peaks)
        if large != small:
            line += f"{peaks[-1] / peaks[0]:>8.2f}"
        print(line + f"{'  ' + ' / '.join(stage_peak(results[size][stage]) for size in opts.sizes):>16}")
    if large != small:
        print(f"ratio: peak at {large:,} pictures over peak at {small:,} ({large / small:g} times the data)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    modes = parser.add_subparsers(dest="mode", metavar="{reuters,mnist,scaling}", required=True)
    for dataset in ("reuters", "mnist"):
        epochs = modes.add_parser(dataset, help=f"the train stage of {dataset} against the epochs")
        epochs.add_argument(
            "--epochs", type=harness.positive_ints, default="1,2,4", help="epoch counts, comma-separated"
        )
        epochs.add_argument("--data", type=Path, help="prepared data [default: data/prepared/DATASET]")
        harness.add_overrides(epochs)
        epochs.set_defaults(dataset=dataset, run=epochs_main)
    scaling = modes.add_parser("scaling", help="each stage against the number of pictures (generated)")
    scaling.add_argument(
        "--sizes", type=harness.positive_ints, default="4000,32000", help="pictures of each run, comma-separated"
    )
    scaling.add_argument("--seed", type=int, default=1, help="of the generated pictures")
    scaling.add_argument("--keep", type=Path, help="keep the projects in this folder [default: a temporary one]")
    harness.add_overrides(scaling, help=f"A param of the generated dataset, e.g. train.{NAME}.seed=1.")
    scaling.set_defaults(run=scaling_main)
    opts = parser.parse_args()
    opts.run(opts)


if __name__ == "__main__":
    main()
