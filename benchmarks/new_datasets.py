"""What `pipeline add`'s defaults give on real datasets that no part of the project made, beside
classical models on the same split; and Reuters' mlp model against its default conv1d.

`sets`: every set of benchmarks/real_datasets.py whose source this machine has (pictures drawn
from Debian's fonts, icon themes, emoji and card decks, scikit-learn's digits; texts from
Debian's package lists, manual pages, fortunes, WordNet and the King James Bible; tables from
scikit-learn's bundled sets and apt's package records), and MNIST,
100 pictures of each digit from its training set and 100 of each from its test set (drawn with
seed 0, from the MNIST PNG archive: `--mnist-archive`, by default mnist_png.tar.gz under
PIPELINE_DATA_MIRROR's folder when that is a file:// URL; left out when there is none).

For each set, a clone of this checkout (`git clone`: its committed code, params.yaml and
dvc.yaml) declares it with `pipeline add NAME --kind KIND --url file:///...` at its defaults
(what it chose from the data is printed) and runs `dvc repro evaluate@NAME`, as a user would,
MLflow runs to a throw-away store. It reads the test accuracy (reports/NAME/metrics.json) and
the train stage's train_seconds (reports/NAME/measurements.json), and times the whole `dvc
repro`. The classical models learn from the same training part (the pipeline's training and
validation splits together) and are scored on the same test split:

- pictures: scikit-learn's SVC (RBF kernel, its defaults) and LogisticRegression(max_iter=5000)
  on the raw pixels, at the side and colour `pipeline add` chose, scaled to [0, 1], each
  picture read as the pipeline reads it (a transparent one laid on white, or on black where
  it would vanish on white);
- texts: TfidfVectorizer(sublinear_tf=True, ngram_range=(1, 2)) with LinearSVC() and with
  LogisticRegression(C=10) (the template is a linear SVM too, on words, pairs and the words'
  character n-grams: docs/own-data.md); the test split is the one preprocess draws (test_split,
  split_seed, stratify of the dataset's section).
- tables: LogisticRegression(max_iter=5000) on the numbers standardised and the categories
  one-hot, and HistGradientBoostingClassifier (GBT) on the numbers and the categories' codes,
  each on the columns `pipeline add` kept (its categorical and ignore); the test split is the
  one preprocess draws. A table's goal is the logistic regression's accuracy.

    python benchmarks/new_datasets.py [--only sets|reuters] [--sets NAME,NAME] [--seeds 42,1,2] [--mnist-archive PATH]
        [--reuters-data data/prepared/reuters] [--reuters-runs 2]

Beside each set's accuracy it prints how far the validation accuracy fell from one epoch to the
next (the largest fall in the first half of the epochs, and in the second: "swing").

It prints the CPU (lscpu's model name, and whether it has AVX-512F) first, then one table. The
sets take about 50 minutes on 2 cores, each its own `dvc repro`. Needs scikit-learn, which is
not a dependency of the project (`pip install scikit-learn`), and the Debian packages
benchmarks/real_datasets.py lists (a set whose source is missing is skipped, saying why).
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
from typing import Optional

import harness
import real_datasets
from harness import ROOT

MIRROR_ENV = "PIPELINE_DATA_MIRROR"
MNIST_PER_CLASS = 100
REUTERS_MODELS = ("conv1d", "mlp")
# what each `dvc repro` of a set gives (the rest of add_and_repro's row is the set's, the same for every seed)
RUN_KEYS = (
    "test_accuracy",
    "train_seconds",
    "epochs_trained",
    "best_epoch",
    "repro_seconds",
    "swing_first",
    "swing_second",
)
KIND_SHOWN = {"image_folders": "images", "labelled_texts": "texts", "tables": "tables"}
CLASSICAL = {"image_folders": ("svc", "logistic"), "tables": ("boosted", "logistic")}
# the sets the defaults were chosen on (the others are data they were not tuned on): the text
# template's parts were measured one at a time on the text sets here (the n-grams' weight on all
# seven), the small convnet's dropout on the colour sets
TUNED_ON = (
    *("sk_digits", "emoji_groups", "icon_contexts", "cards_suit", "cards_rank"),
    *("debian_sections", "man_sections", "wordnet_nouns", "bible_verses", "debian_groups"),
    *("fortune_topics", "fortune_languages"),
)


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


# --------------------------------------------------------------------------- the sets


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


def sets(opts) -> list[real_datasets.RealSet]:
    """The sets to run: --sets', or every one of real_datasets and MNIST's subset."""
    found = dict(real_datasets.SETS)
    if opts.mnist_archive is not None and opts.mnist_archive.is_file():
        found["mnist_1k"] = real_datasets.RealSet(
            name="mnist_1k",
            kind="image_folders",
            title="MNIST, 100 pictures a digit from each of its splits (28x28 grey)",
            needs=(),
            make=lambda folder: write_mnist_subset(opts.mnist_archive, folder),
        )
    names = opts.sets or list(found)
    unknown = [name for name in names if name not in found]
    if unknown:
        sys.exit(f"error: --sets {','.join(unknown)}: expected some of {', '.join(found)}")
    return [found[name] for name in names]


def yardsticks(project: Path, name: str, folder: Path, kind: str) -> dict[str, float]:
    """The classical models' test accuracy on the split the pipeline trains and tests on, with
    the settings `pipeline add` wrote into the clone's params.yaml."""
    params = harness.load_params(name, path=project / "params.yaml")
    pre = params.preprocess
    if kind == "image_folders":
        return real_datasets.picture_yardsticks(folder, pre.image_size, pre.color)
    if kind == "tables":
        _, rows = real_datasets.table_rows(folder)
        test = test_rows([r[pre.label_column] for r in rows], pre)
        return real_datasets.table_yardsticks(
            [r for i, r in enumerate(rows) if i not in test],
            [rows[i] for i in sorted(test)],
            pre.label_column,
            list(pre.categorical),
            list(pre.ignore),
        )
    texts, labels = real_datasets.text_rows(folder)
    test = test_rows(labels, pre)
    train = [i for i in range(len(texts)) if i not in test]
    return real_datasets.text_yardsticks(
        [texts[i] for i in train], [labels[i] for i in train], [texts[i] for i in test], [labels[i] for i in test]
    )


def test_rows(labels: list[str], pre) -> set[int]:
    """The rows preprocess puts in the test split (its own split of the table: pipeline/data/texts.py)."""
    import numpy as np

    from pipeline.data import texts

    classes = texts.class_order(set(labels))
    position = {label: i for i, label in enumerate(classes)}
    indices = np.array([position[label] for label in labels]) if pre.stratify else None
    places = texts.split_places(len(labels), pre, indices)
    return {row for row, (split, _) in enumerate(places) if split == "test"}


def add_and_repro(
    name: str, kind: str, folder: Path, tmp: Path, seed: Optional[int] = None, classical: bool = True
) -> dict:
    """`pipeline add NAME --kind KIND --url file://...` (the folder, or its table) in a clone of this
    checkout (with `seed`, `-S train.NAME.seed=SEED`), then `dvc repro evaluate@NAME`: what add
    printed and the classical models on the same split (with `classical`: the split is
    preprocess's, the same whatever the training's seed), the test accuracy, the train stage's
    train_seconds, epochs trained and best epoch, and the wall seconds of the whole `dvc repro`."""
    project = tmp / f"project-{name}"
    env = harness.dvc_env()
    env.pop(MIRROR_ENV, None)  # a mirror would look the folder up under it by its base name
    env["MLFLOW_TRACKING_URI"] = f"sqlite:///{tmp / 'mlflow.db'}"
    harness.run(["git", "clone", "-q", str(ROOT), str(project)], cwd=tmp, env=env)
    # pictures: the folder of image folders; texts and tables: the folder's one table
    source = folder if kind == "image_folders" else next(folder.glob("*.csv"))
    seeded = [] if seed is None else ["-S", f"train.{name}.seed={seed}"]
    add = harness.pipeline_argv("add", name, "--kind", kind, "--url", source.resolve().as_uri(), *seeded, quiet=False)
    added = harness.run(add, cwd=project, env=env)
    found = {}
    if classical:
        print("  " + "\n  ".join(added.out.strip().splitlines()[1:-1]), flush=True)
        found = yardsticks(project, name, folder, kind)
    run = harness.run([sys.executable, "-m", "dvc", "repro", f"evaluate@{name}"], cwd=project, env=env)
    reports = project / "reports" / name
    metrics = json.loads((reports / "metrics.json").read_text())
    figures = harness.train_figures(reports)  # train.json's and measurements.json's
    first, second = swings(reports / "history.csv")
    shutil.rmtree(project)
    return {
        **found,
        "swing_first": first,
        "swing_second": second,
        "test_accuracy": metrics["test_accuracy"],
        "train_seconds": figures["train_seconds"],
        "epochs_trained": figures["epochs_trained"],
        "best_epoch": figures.get("best_epoch"),
        "repro_seconds": run.seconds,
    }


def swings(history: Path) -> tuple[float, float]:
    """The largest fall of the validation accuracy from one epoch to the next in the first half
    of the epochs trained and in the second, which begins with the change into its first epoch
    (history.csv's val_accuracy): a model that learns gains at every epoch or nearly, one whose
    validation swings loses at some; 0 without a fall or a validation split."""
    import csv
    import math

    with history.open(newline="") as f:  # without a validation split its column holds nan
        values = [float(row["val_accuracy"]) for row in csv.DictReader(f) if row.get("val_accuracy")]
    values = [v for v in values if math.isfinite(v)]
    falls = [max(a - b, 0.0) for a, b in zip(values, values[1:])]  # fall i: into epoch i + 2
    half = len(values) // 2
    return max(falls[: half - 1], default=0.0), max(falls[max(half - 1, 0) :], default=0.0)


def default_mnist_archive() -> Path | None:
    """mnist_png.tar.gz under PIPELINE_DATA_MIRROR's folder, when that is a file:// URL."""
    import urllib.parse
    import urllib.request

    parsed = urllib.parse.urlparse(os.environ.get(MIRROR_ENV, ""))
    if parsed.scheme != "file":
        return None
    return Path(urllib.request.url2pathname(parsed.path)) / "mnist_png.tar.gz"


def sets_main(opts, tmp: Path) -> list[dict]:
    """Each set: written, declared at its defaults, its stages run, the classical models beside."""
    rows = []
    for real in sets(opts):
        missing = real_datasets.available(real)
        if missing is not None:
            print(f"{real.name}: skipped ({missing})", flush=True)
            continue
        folder = tmp / "sets" / real.name
        counts = real.make(folder)
        print(f"{real.name}: {real.title}; {json.dumps(counts)}", flush=True)
        row = {"set": real.name, "kind": real.kind, "tuned": real.name in TUNED_ON, **counts}
        runs = []
        for i, seed in enumerate(opts.seeds or [None]):
            run = add_and_repro(real.name, real.kind, folder, tmp, seed, classical=i == 0)
            row.update({key: run.pop(key) for key in list(run) if key not in RUN_KEYS})
            classical = " ".join(f"{key} {row[key]:.4f}" for key in classical_keys(real.kind))
            print(
                f"  defaults{'' if seed is None else f' (seed {seed})'}: test accuracy {run['test_accuracy']:.4f}, "
                f"{run['epochs_trained']} epochs (best {run['best_epoch']}), train {run['train_seconds']:.0f} s, "
                f"dvc repro {run['repro_seconds']:.0f} s; validation accuracy's largest fall between epochs "
                f"{run['swing_first']:.3f} (first half), {run['swing_second']:.3f} (second half); {classical}",
                flush=True,
            )
            runs.append(run)
        rows.append({**row, **over_seeds(runs)})
        shutil.rmtree(folder)
    return rows


def over_seeds(runs: list[dict]) -> dict:
    """One set's runs as one row: the mean test accuracy and train seconds, the lowest and
    highest accuracy, the longest `dvc repro` (the goal's 5 minutes hold for each run) and the
    largest swings of the validation accuracy (`swings`)."""
    accuracies = [r["test_accuracy"] for r in runs]
    return {
        "test_accuracy": sum(accuracies) / len(accuracies),
        "lowest": min(accuracies),
        "highest": max(accuracies),
        "seeds": len(runs),
        "train_seconds": sum(r["train_seconds"] for r in runs) / len(runs),
        "repro_seconds": max(r["repro_seconds"] for r in runs),
        "swing_first": max(r["swing_first"] for r in runs),
        "swing_second": max(r["swing_second"] for r in runs),
    }


def classical_keys(kind: str) -> tuple[str, str]:
    """The two classical models' keys: (the first column's, the logistic regression's)."""
    return CLASSICAL.get(kind, ("linear_svc", "logistic"))


def goal(row: dict) -> float:
    """The accuracy the defaults must reach: the better classical model's (a table's: the
    logistic regression's, the yardstick a network on a small table does well to match)."""
    svm, logistic = (row[key] for key in classical_keys(row["kind"]))
    return logistic if row["kind"] == "tables" else max(svm, logistic)


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


def print_table(rows: list[dict], reuters: list[dict]) -> None:
    if rows:
        print()
        seeds = max(r["seeds"] for r in rows)
        if seeds > 1:
            print(f"defaults: the mean of {seeds} seeds' test accuracy, and its lowest and highest")
        spread = f"{'lowest':>8}{'highest':>8}" if seeds > 1 else ""
        print(
            f"{'set':<20}{'kind':>8}{'tuned on':>9}{'samples':>15}{'defaults':>10}{spread}{'SVM/GBT':>8}"
            f"{'logistic':>10}{'better':>8}{'train s':>9}{'repro s':>9}{'swing':>13}"
        )
        for r in rows:
            svm, logistic = (r[key] for key in classical_keys(r["kind"]))
            samples = f"{r['train']:,} / {r['test']:,}" if "train" in r else f"{r['rows']:,} rows"
            better = "yes" if r["test_accuracy"] >= goal(r) else "no"
            spread = f"{r['lowest']:>8.4f}{r['highest']:>8.4f}" if seeds > 1 else ""
            print(
                f"{r['set']:<20}{KIND_SHOWN[r['kind']]:>8}"
                f"{'yes' if r['tuned'] else 'no':>9}{samples:>15}{r['test_accuracy']:>10.4f}{spread}{svm:>8.4f}"
                f"{logistic:>10.4f}{better:>8}{r['train_seconds']:>9.0f}{r['repro_seconds']:>9.0f}"
                f"{r['swing_first']:>7.3f}{r['swing_second']:>6.3f}"
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
    parser.add_argument("--only", choices=("sets", "reuters"), help="Run one part alone [default: both].")
    parser.add_argument(
        "--sets", type=lambda text: text.split(","), default=None, help="These sets only, by name [default: all]."
    )
    parser.add_argument(
        "--seeds",
        type=lambda text: [int(seed) for seed in text.split(",")],
        default=None,
        help="Train each set once per seed (train.NAME.seed), the table showing the mean and the spread "
        "[default: once, at the template's seed].",
    )
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
    if opts.mnist_archive is not None and not opts.mnist_archive.is_file() and "--mnist-archive" in sys.argv:
        sys.exit(f"error: the MNIST PNG archive {opts.mnist_archive}: not found")
    if opts.only != "sets" and not (opts.reuters_data / "stats.json").is_file():
        sys.exit(f"error: {opts.reuters_data}: no prepared Reuters; run `dvc repro preprocess@reuters` first")
    print("\n".join(cpu_lines()), flush=True)
    tmp = Path(tempfile.mkdtemp(prefix="bench-new-datasets-"))
    try:
        rows = sets_main(opts, tmp) if opts.only != "reuters" else []
        reuters = reuters_main(opts, tmp) if opts.only != "sets" else []
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print_table(rows, reuters)


if __name__ == "__main__":
    main()
