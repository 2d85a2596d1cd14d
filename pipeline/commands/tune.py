"""`pipeline tune`: an Optuna study of a dataset's train params, its workers on this host
(pipeline.tuning.workers), its best trial as a `dvc exp run` line, run with --apply."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from pipeline.options import data_option, params_option, set_option
from pipeline.tuning import studies, workers


@click.command("tune")
@click.argument("dataset")
@set_option("for this study", "tune.reuters.trials=40 or train.reuters.epochs=5")
@click.option("--study", default=None, help="The study's name.  [default: tune.DATASET.study]")
@click.option(
    "--storage",
    default=None,
    metavar="URL",
    help="Where the study lives: a journal file that processes of one host (or a shared file "
    "system) share, or a database URL (postgresql://USER:PASSWORD@HOST/DB) for several hosts.  "
    "[default: optuna.journal beside mlflow.db]",
)
@click.option(
    "--workers",
    "worker_count",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Worker processes on this host, the cores shared out between them.",
)
@data_option
@click.option("--best", "best_only", is_flag=True, help="Run no trial: show the best so far and its dvc exp run line.")
@click.option(
    "--apply",
    "apply_best",
    is_flag=True,
    help="Then run the best trial as the DVC experiment tune-STUDY-best (train and evaluate).",
)
@params_option
def tune_command(dataset, overrides, study, storage, worker_count, data, best_only, apply_best, params_path):
    """Search train.DATASET's params with an Optuna study (tune.DATASET in the params file).

    Each trial trains with the train stage's code and reports each epoch's metric to the
    pruner; each is an MLflow run nested under the study's run, in the dataset's experiment.
    A rerun continues the study; other hosts join it with the same --study and --storage. The
    best trial is printed as the `dvc exp run` line that reproduces it (--apply runs it)."""
    target = workers.Target.make(
        dataset, params_path, overrides, study, storage, data or Path("data/prepared") / dataset
    )
    if best_only:
        opened = studies.open_study(target.params, target.study, target.storage, create=False)
    else:
        opened = workers.run(target, worker_count)
    for line in workers.summary(target, opened):
        click.echo(line)
    if apply_best:
        sys.exit(workers.apply(target, opened))
