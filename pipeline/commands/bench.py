"""`pipeline bench`: the training throughput with the params in force, at one replica count or
several (pipeline.tools.bench), printed, logged to MLflow and, with --json, written."""

from __future__ import annotations

from pathlib import Path

import click

from pipeline.io import write_json
from pipeline.options import data_option, params_option, set_option
from pipeline.tools import bench


@click.command("bench")
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
