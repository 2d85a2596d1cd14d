"""`pipeline selftest`: distributed training checked on this host, N replicas against one device
(pipeline.tools.selftest); exit 1 when a check fails."""

from __future__ import annotations

import sys
import time

import click

from pipeline.config.loading import loader
from pipeline.options import dataset_option, json_option, params_option
from pipeline.tools import selftest


@click.command("selftest")
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
