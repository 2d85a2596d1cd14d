"""The `pipeline` command: the DVC stages' commands, plus `add`, `bench`, `compare`, `devices`,
`doctor`, `params`, `promote`, `remove`, `selftest`, `serve`, `tune` and `ui`.

The stage commands live in the application layer (`stages/`) and are found through the
package's entry points (group `pipeline.stages`, in pyproject.toml), so the library never
imports them, and each is imported only when listed or invoked: `pipeline --help` (and any
config error) never imports TensorFlow.
"""

from __future__ import annotations

import difflib
import json
import shutil
import sys
import time
from importlib.metadata import entry_points
from pathlib import Path

import click

from pipeline import errors, log
from pipeline.config.commands import declare, params_doc
from pipeline.config.keys.schema import STAGES
from pipeline.config.loading import loader
from pipeline.config.loading.loader import load_params
from pipeline.io import write_json
from pipeline.kinds.known import KINDS
from pipeline.options import data_option, dataset_option, host_option, json_option, params_option, set_option
from pipeline.runtime import imports, usage
from pipeline.serving import registry, server
from pipeline.tools import bench, devices, doctor, selftest
from pipeline.tracking import compare, probe, ui
from pipeline.tuning import studies, workers

STAGE_ENTRY_POINTS = "pipeline.stages"


class LazyGroup(click.Group):
    """A group whose stage commands are loaded from entry points on first use."""

    def _stages(self) -> dict:
        found = {ep.name: ep for ep in entry_points(group=STAGE_ENTRY_POINTS)}
        return {name: found[name] for name in [*STAGES, *sorted(found)] if name in found}

    def list_commands(self, ctx):
        return [*self._stages(), *super().list_commands(ctx)]

    def get_command(self, ctx, name):
        stage = self._stages().get(name)
        if stage is None and name in STAGES:
            # run from a clone without `pip install -e .`: no package metadata, no entry points
            raise click.UsageError(
                f"the stage command {name!r} is not installed: run `pip install -e .` "
                f"in the repository (the stages are found through its entry points)"
            )
        return stage.load() if stage is not None else super().get_command(ctx, name)

    def resolve_command(self, ctx, args):
        # click suggests only among the commands defined here, not the stages: suggest among all
        name = args[0] if args else ""
        if name and not name.startswith("-") and self.get_command(ctx, name) is None:
            hint = difflib.get_close_matches(name, self.list_commands(ctx), n=1)
            raise click.UsageError(f"No such command {name!r}." + (f" Did you mean {hint[0]!r}?" if hint else ""), ctx)
        return super().resolve_command(ctx, args)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="pipeline", message="%(prog)s %(version)s")
@click.option("-v", "--verbose", is_flag=True, help="Also show details, and TensorFlow's, Keras' and MLflow's notices.")
@click.option("-q", "--quiet", is_flag=True, help="Show warnings and errors only.")
def cli(verbose, quiet):
    """Reproducible experiments: download, preprocess, train (tf.distribute) and evaluate
    the Reuters and MNIST datasets. DVC runs the stages (`dvc repro`); MLflow records the runs
    (`mlflow ui`). Defaults live in params.yaml."""
    log.configure(1 if verbose else -1 if quiet else 0)
    usage.limit_malloc_arenas()
    imports.skip_keras_extras()
    click.get_current_context().meta["pipeline.started"] = time.perf_counter()


@cli.result_callback()
def stage_finished(_result, **_options):
    """After a stage that succeeded: its wall time and peak memory, one line on stderr."""
    ctx = click.get_current_context()
    if ctx.invoked_subcommand in STAGES:
        seconds = time.perf_counter() - ctx.meta["pipeline.started"]
        where = " ".join(filter(None, (ctx.invoked_subcommand, ctx.meta.get("pipeline.dataset"))))
        log.log.info("%s: done in %.1f s, peak memory %s MB", where, seconds, f"{usage.peak_rss_mb():,.0f}")


@cli.command("devices")
@dataset_option()
@params_option
@json_option
def devices_command(dataset, params_path, as_json):
    """Show devices and the strategy training would use."""
    report = devices.report(params_path, dataset)
    click.echo(json.dumps(report, indent=2) if as_json else devices.as_text(report))


@cli.command("params")
@click.argument("dataset", required=False)
@params_option
@click.option("--markdown", is_flag=True, help="Print the table docs/params.md shows (a column per dataset).")
@click.option(
    "--rewrite",
    is_flag=True,
    help="Rewrite the params file in the form `dvc exp run -S` writes it (after a hand edit), "
    "so that an override changes one line.",
)
def params_command(dataset, params_path, markdown, rewrite):
    """Every param, its value and what it means.

    Each key of the params file, the datasets' then the add section's templates (DATASET's
    alone, when given), as `dvc exp run -S` takes it, with its value and its meaning; the
    meanings are the config types' own (pipeline/config/keys/schema.py), which also check them."""
    width = min(shutil.get_terminal_size((100, 24)).columns, 100) - 1
    click.echo(params_doc.command(params_path, dataset, markdown=markdown, rewrite=rewrite, width=width), nl=False)


@cli.command("add")
@click.argument("name")
@click.option(
    "--kind",
    type=click.Choice(list(KINDS)),
    required=True,
    help="What its samples are: " + "; ".join(f"{kind.name}, {kind.help}" for kind in KINDS.values()) + ".",
)
@click.option("--url", required=True, help="Where its file is published: http://, https:// or file://.")
@click.option("--sha256", metavar="HEX", help="The file's sha256, checked by the download.  [default: none]")
@click.option(
    "--photos",
    is_flag=True,
    help="Image folders of photos: MobileNetV2 from ImageNet weights (add.photos) whatever the pictures' size "
    "(without it, pictures over 128 pixels a side are taken as photos, smaller ones get add.image_folders' small "
    "convnet learnt from scratch).",
)
@set_option("in the new sections", "preprocess.NAME.text_column=summary")
@params_option
def add_command(name, kind, url, sha256, photos, overrides, params_path):
    """Declare a dataset NAME: its sections in the params file, its stages in dvc.yaml.

    KIND says what its samples are (--kind below lists the kinds). It reads the dataset first
    (fetched into a temporary folder, or where a file:// URL names it) and prints each setting
    it chooses from it, with the figure it chose it from: for pictures the side to train at, the
    colour, photos or not and the class weights; for texts the sequence length, the vocabulary
    and the class weights. Each stage section of the params file gets a copy of add.KIND
    (add.photos for photos), the defaults of a new dataset, with --url, --sha256, the choices
    and each -S set (which wins over a choice); dvc.yaml lists NAME in each foreach, and its
    measurements and learning curves. Both files are checked first, and neither is written
    unless both are. Then `dvc repro evaluate@NAME` runs its stages (docs/own-data.md)."""
    click.echo(declare.add(params_path, name, kind, url, sha256, overrides, photos=photos))


@cli.command("remove")
@click.argument("name")
@params_option
def remove_command(name, params_path):
    """Take dataset NAME out of the params file and dvc.yaml: `pipeline add`'s way back.

    Its sections, and its name in dvc.yaml's foreach lists, metrics and plots; its files
    (data/, models/, reports/), dvc.lock and its MLflow runs and model are left alone."""
    click.echo(declare.remove(params_path, name))


@cli.command("bench")
@click.argument("dataset")
@set_option("for this measurement", "train.reuters.steps_per_execution=8")
@data_option
@click.option(
    "--warmup",
    type=click.IntRange(min=1),
    default=20,
    show_default=True,
    help="Steps run before the timing (tracing, first allocations).",
)
@click.option("--steps", type=click.IntRange(min=1), default=200, show_default=True, help="Steps timed.")
@click.option(
    "--replicas",
    default=None,
    metavar="N,N,...",
    help="Measure scaling: once per replica count, each in its own process (N logical CPU "
    "devices, or the first N GPUs), with the efficiency against the first count.",
)
@click.option(
    "--json",
    "json_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Also write the figures as JSON to this file.",
)
@click.option("--no-mlflow", is_flag=True, help="Do not log the measurement as an MLflow run.")
@params_option
def bench_command(dataset, overrides, data, warmup, steps, replicas, json_path, no_mlflow, params_path):
    """Measure training throughput with the params in force.

    Warm-up steps, then timed steps of the train stage's model on its real input pipeline:
    samples per second (global and per replica), the arithmetic done (the model's FLOPs per
    training sample, GFLOP/s) as a share of the devices' peak, step time (median, 95th
    percentile), the share of time spent waiting for input, CPU use of the process, peak
    memory. Each
    measurement is logged as an MLflow run tagged pipeline.benchmark, in the dataset's
    experiment."""
    results = bench.run(
        params_path,
        dataset,
        overrides,
        prepared_dir=data or Path("data/prepared") / dataset,
        warmup=warmup,
        steps=steps,
        replicas=replicas,
        log_runs=not no_mlflow,
    )
    if json_path is not None:
        write_json(json_path, results if replicas is not None else results[0])
    click.echo(bench.report(results))


@cli.command("doctor")
@dataset_option()
@params_option
@json_option
def doctor_command(dataset, params_path, as_json):
    """Check this host before a run: problems and their fixes.

    Git, DVC, the MLflow tracking store, disk, GPUs, driver and library versions, shared
    memory and the strategy, one line each: pass, warn or fail with its fix. Exits 1 if any
    check fails."""
    results = doctor.run_checks(params_path, dataset)
    click.echo(doctor.report(results, as_json))
    if any(c.status == "fail" for c in results):
        sys.exit(1)


@cli.command("selftest")
@dataset_option(multiple=True)
@click.option(
    "--steps", type=click.IntRange(min=1), default=3, show_default=True, help="Training steps each process takes."
)
@params_option
@json_option
def selftest_command(datasets, steps, params_path, as_json):
    """Check distributed training on this host before a long run, in minutes.

    For each dataset's model at the params in force: N replicas over every visible GPU (2
    logical CPU devices where there is none) and one device take the same steps from the same
    weights, and their updates must agree; no loss may be NaN or infinite; the all-reduce in
    force must sum every replica's value right. One line per check; exits 1 if any fails."""
    started = time.perf_counter()
    checks = selftest.run(params_path, datasets or loader.names(params_path), steps)
    click.echo(selftest.report(checks, as_json, time.perf_counter() - started))
    if any(c.status == "fail" for c in checks):
        sys.exit(1)


@cli.command("tune")
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


@cli.command("promote")
@click.argument("dataset")
@click.argument("version", type=click.IntRange(min=1), required=False)
@click.option("--force", is_flag=True, help="Move the alias whatever the version scores (a rollback).")
@params_option
def promote_command(dataset, version, force, params_path):
    """Make a registered version of DATASET the champion (the alias `pipeline serve` serves).

    VERSION is a version of the registered model DATASET (evaluate registers each model it
    evaluates); by default the best by promote.DATASET.metric. The alias moves only if the
    version beats the champion by promote.DATASET.margin on the same test split, and the
    reason is printed when it does not (exit 1); --force moves it anyway."""
    cfg = load_params(params_path, dataset).promote
    probe.check_tracking()
    decision = registry.promote(dataset, cfg, version, force)
    click.echo(decision.message)
    if decision.refused:
        sys.exit(1)


@cli.command("serve")
@click.argument("dataset")
@click.option("--alias", default="champion", show_default=True, help="Serve the version this alias points at.")
@click.option(
    "--version", "version", type=click.IntRange(min=1), default=None, help="Serve this version instead of the alias's."
)
@host_option
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    default=5001,
    show_default=True,
    help="Port to serve on (the MLflow UI has 5000).",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Server processes, each with its own copy of the model.",
)
@params_option
def serve_command(dataset, alias, version, host, port, workers, params_path):
    """Serve DATASET's registered model over HTTP with `mlflow models serve`.

    The champion by default (`pipeline promote DATASET` sets it), from the tracking store
    MLFLOW_TRACKING_URI names (unset: mlflow.db here), in this environment
    (--env-manager local). POST /invocations a JSON request: Reuters takes a newswire's
    `text` (or Keras' word-id sequence, `ids`), MNIST a PNG or JPEG `image` (base64) or 28x28
    `pixels`; each row gets its label, probability and top k. Ctrl+C stops it."""
    metric = load_params(params_path, dataset).promote.metric
    server.serve(dataset, alias, version, metric, host, port, workers, click.echo)


@cli.command("compare")
@click.argument("runs", nargs=-1, required=True, metavar="RUN...")
@click.option("--all", "show_all", is_flag=True, help="Show the params and tags that are equal too.")
@json_option
@click.option("--csv", "as_csv", is_flag=True, help="Print CSV: section, key, one column per run.")
def compare_command(runs, show_all, as_json, as_csv):
    """MLflow runs side by side: what differs among them, and their metrics.

    RUN is a run id, a run name or a DVC experiment name (`dvc exp show`), in the tracking
    store MLFLOW_TRACKING_URI names (unset: mlflow.db in the repository root). Shown: the
    params (stage params, device counts, strategy) and lineage tags (commit, data hashes,
    versions, host) whose values differ among the runs, and every metric (a run's last value;
    system metrics left out)."""
    if as_json and as_csv:
        raise click.UsageError("give --json or --csv, not both")
    form = "json" if as_json else "csv" if as_csv else "text"
    click.echo(compare.render(compare.compare(runs, show_all=show_all), form), nl=False)


@cli.command("ui")
@host_option
@click.option("--port", type=int, default=5000, show_default=True, help="Port to serve on (MLflow's own).")
def ui_command(host, port):
    """MLflow's UI on this project's runs, on 127.0.0.1.

    The runs in mlflow.db in the repository root, or in the store MLFLOW_TRACKING_URI names
    (a tracking server already serves its UI: its URL is printed), with a link to each
    experiment's runs table (MLflow 3.17 opens an experiment on its GenAI overview until the
    browser's "Model training" switch is on). One worker, no job runners, no access log;
    Ctrl+C stops it."""
    sys.exit(ui.serve(host, port, click.echo))


def main(args=None) -> None:
    """`pipeline`: its arguments parsed and the command run, every failure one `error:` line and
    an exit code (pipeline.errors.report): 2 for usage and config errors, 1 for data,
    download and tracking errors and for anything unexpected, 130 for Ctrl+C."""
    sys.exit(errors.report(lambda: _parse_and_run(args)))


def _parse_and_run(args) -> int:
    try:
        return cli.main(args=args, prog_name="pipeline", standalone_mode=False)
    except click.UsageError as exc:
        where = exc.ctx.command_path if exc.ctx is not None else "pipeline"
        return log.fail(f"{where}: {exc.format_message()} (see '{where} --help')", exc.exit_code)
    except click.ClickException as exc:
        return log.fail(exc.format_message(), exc.exit_code)
    except click.Abort:
        raise KeyboardInterrupt from None
