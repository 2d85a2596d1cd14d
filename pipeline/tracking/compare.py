"""`pipeline compare`: MLflow runs side by side, showing what differs among them.

The runs table of MLflow's UI, for a terminal, a script or CI: each run's params (the stages'
params, device counts and strategy), its lineage tags and its metrics; by default only the
params and tags whose values differ among the runs, and every metric. Runs are named by run
id, run name or DVC experiment name, in whichever store `MLFLOW_TRACKING_URI` names (the
default: mlflow.db in the repository root).
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Sequence
from typing import Optional

from pipeline.errors import ConfigError
from pipeline.tracking import probe, store

# The tags that say where a run's numbers came from: code, data, software, host.
LINEAGE_PREFIXES = (
    "git.",
    "dvc.data.",
    "dvc.exp_baseline_rev",
    "tensorflow.",
    "keras.",
    "cuda.",
    "cudnn.",
    "python.",
    "host",
    "container.",
    "weights.",
    "pipeline.model_run_id",
)
SECTIONS = ("params", "tags", "metrics")
_RUN_ID = re.compile(r"^[0-9a-f]{32}$")


def find_runs(client, names: Sequence[str], uri: str) -> list:
    """The run each of `names` denotes: a run id, else the one run of that run name or DVC
    experiment name in any experiment. ConfigError for a name that matches none or several."""
    from mlflow.entities import ViewType

    experiments = [e.experiment_id for e in client.search_experiments(view_type=ViewType.ACTIVE_ONLY)]
    runs = []
    for name in names:
        if _RUN_ID.match(name):
            from mlflow.exceptions import MlflowException

            try:
                runs.append(client.get_run(name))
                continue
            except MlflowException:
                pass  # a run name that looks like an id: searched below
        quoted = name.replace("'", "\\'")
        found = {}
        for query in (f"attributes.run_name = '{quoted}'", f"tags.`dvc.exp_name` = '{quoted}'"):
            for run in client.search_runs(experiments, filter_string=query, max_results=50) if experiments else []:
                found[run.info.run_id] = run
        if not found:
            raise ConfigError(
                f"no run named {name!r} in {uri}: give a run id, a run name or a "
                "DVC experiment name (`dvc exp show` lists them)"
            )
        if len(found) > 1:
            ids = ", ".join(sorted(found))
            raise ConfigError(f"{name!r} names {len(found)} runs in {uri} ({ids}): give run ids")
        runs.extend(found.values())
    return runs


def table(runs: list, show_all: bool = False) -> dict:
    """{"runs": [{id, name}], "params"|"tags"|"metrics": {key: [value per run]}}: params and
    lineage tags whose values differ (all of them with `show_all`), and every metric but the
    system metrics. A run that lacks a key has None there."""

    def rows(values_per_run: list[dict], keep_equal: bool) -> dict:
        keys = sorted(set().union(*values_per_run))
        out = {}
        for key in keys:
            values = [values.get(key) for values in values_per_run]
            if keep_equal or len({json.dumps(v) for v in values}) > 1:
                out[key] = values
        return out

    lineage = [{k: v for k, v in run.data.tags.items() if k.startswith(LINEAGE_PREFIXES)} for run in runs]
    metrics = [{k: v for k, v in run.data.metrics.items() if not k.startswith("system/")} for run in runs]
    return {
        "runs": [
            {"run_id": run.info.run_id, "run_name": run.info.run_name, "experiment_id": run.info.experiment_id}
            for run in runs
        ],
        "params": rows([dict(run.data.params) for run in runs], show_all),
        "tags": rows(lineage, show_all),
        "metrics": rows(metrics, True),
    }


def _cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def as_text(result: dict, width: int = 40) -> str:
    """Aligned columns: one per run, under its name and id; a section per kind of value."""
    names = [r["run_name"] or r["run_id"][:8] for r in result["runs"]]
    ids = [r["run_id"][:8] for r in result["runs"]]
    lines: list[tuple[str, Optional[list]]] = [("", names), ("run id", ids)]
    for section in SECTIONS:
        lines.append((f"[{section}]" + ("" if result[section] else " (none differ)"), None))
        lines.extend((key, [_cell(v) for v in values]) for key, values in result[section].items())
    label = max(len(key) for key, _ in lines)
    widths = [max(len(row[i]) for _, row in lines if row) for i in range(len(names))]
    widths = [min(w, width) for w in widths]
    out = []
    for key, row in lines:
        if row is None:
            out.append(key)
            continue
        cells = [(v if len(v) <= w else v[: w - 1] + "~").ljust(w) for v, w in zip(row, widths)]
        out.append(f"{key:<{label}}  " + "  ".join(cells).rstrip())
    return "\n".join(out)


def render(result: dict, form: str) -> str:
    """What `pipeline compare` prints: the comparison as `form`, json, csv or text."""
    if form == "json":
        return json.dumps(result, indent=2) + "\n"
    return as_csv(result) if form == "csv" else as_text(result) + "\n"


def as_csv(result: dict) -> str:
    """One row per value: section, key, then one column per run (named by run id)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["section", "key", *[r["run_id"] for r in result["runs"]]])
    writer.writerow(["run", "run_name", *[r["run_name"] for r in result["runs"]]])
    for section in SECTIONS:
        for key, values in result[section].items():
            writer.writerow([section, key, *["" if v is None else v for v in values]])
    return buffer.getvalue()


def compare(names: Sequence[str], *, show_all: bool = False) -> dict:
    """The comparison of the runs `names`, in the tracking store in force."""
    if len(names) < 2:  # a usage error: before MLflow's import, as the CLI's own are
        raise ConfigError("compare needs two runs or more")
    from mlflow import MlflowClient

    uri = store.tracking_uri()
    probe.check_tracking(uri)
    path = store.sqlite_path(uri)
    if path is not None and not path.exists():
        raise ConfigError(
            f"{uri}: no MLflow store here yet; run from the repository root, or set "
            "MLFLOW_TRACKING_URI to the store that holds the runs"
        )
    return table(find_runs(MlflowClient(uri), names, uri), show_all=show_all)
