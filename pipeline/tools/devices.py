"""`pipeline devices`: the devices TensorFlow sees on this host, and the strategy a dataset's
training would use on them (its train params applied, as the train stage applies them)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from pipeline.config.loading.loader import load_params, names
from pipeline.training import distribute


def report(params_path: Path, dataset: Optional[str]) -> dict:
    """The physical and logical devices, with `distribute.Setup.facts` (strategy, replicas,
    workers, devices, all-reduce) for `dataset`'s train params (None: the file's first dataset's)."""
    dataset = dataset or names(params_path)[0]
    cfg = load_params(params_path, dataset).train
    setup = distribute.setup(cfg, where=f"train.{dataset}")
    import tensorflow as tf

    return {
        "physical": [{"name": d.name, "type": d.device_type} for d in tf.config.list_physical_devices()],
        "logical": [{"name": d.name, "type": d.device_type} for d in tf.config.list_logical_devices()],
        **setup.facts,
    }


def as_text(found: dict) -> str:
    """The report for a terminal: the devices, a line each, then the strategy and its all-reduce."""
    lines = [
        "physical devices:",
        *(f"  {d['name']} ({d['type']})" for d in found["physical"]),
        "logical devices:",
        *(f"  {d['name']} ({d['type']})" for d in found["logical"]),
        f"strategy: {found['strategy']}, {found['replicas']} replica(s), {found['workers']} worker(s), "
        f"on {', '.join(found['devices'])}",
        f"all-reduce: {found['cross_device_ops']}",
    ]
    return "\n".join(lines)
