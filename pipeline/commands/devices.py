"""`pipeline devices`: the devices TensorFlow would see and the strategy training would use
(pipeline.tools.devices), as text or JSON."""

from __future__ import annotations

import json

import click

from pipeline.options import dataset_option, json_option, params_option
from pipeline.tools import devices


@click.command("devices")
@dataset_option()
@params_option
@json_option
def devices_command(dataset, params_path, as_json):
    """Show devices and the strategy training would use."""
    report = devices.report(params_path, dataset)
    click.echo(json.dumps(report, indent=2) if as_json else devices.as_text(report))
