"""pipeline/tracking/compare.py's table of runs as MLflow hands them over: the params and lineage
tags that differ (all of them with show_all) and every metric but the system ones, a key a run
lacks shown as missing; as aligned text (long values cut), CSV and JSON; fewer than two runs
refused before MLflow is asked. The runs found by name in a real store, through the command:
tests/commands/test_compare_command.py."""

import json
from types import SimpleNamespace

import pytest

from pipeline.errors import ConfigError
from pipeline.tracking import compare


def run(run_id: str, name, params: dict, tags: dict, metrics: dict) -> SimpleNamespace:
    """A run as MlflowClient returns one: its info and data."""
    info = SimpleNamespace(run_id=run_id, run_name=name, experiment_id="1")
    return SimpleNamespace(info=info, data=SimpleNamespace(params=params, tags=tags, metrics=metrics))


BASE = run(
    "a" * 32,
    "reuters-fit-1rep-float32-1111111",
    {"train.reuters.learning_rate": "0.001", "train.reuters.epochs": "10"},
    {"git.commit": "1" * 40, "host": "h", "mlflow.user": "u", "pipeline.stage": "train"},
    {"test_accuracy": 0.63, "system/cpu_utilization_percentage": 50.0},
)
UNNAMED = run(
    "b" * 32,
    None,
    {"train.reuters.learning_rate": "0.002", "train.reuters.epochs": "10", "distribute.replicas": "2"},
    {"git.commit": "2" * 40, "host": "h", "mlflow.user": "v"},
    {"test_accuracy": 0.6123456789},
)


def test_what_differs_among_the_runs_and_every_metric_but_the_systems():
    table = compare.table([BASE, UNNAMED])
    assert [r["run_id"] for r in table["runs"]] == ["a" * 32, "b" * 32]
    assert table["params"] == {"distribute.replicas": [None, "2"], "train.reuters.learning_rate": ["0.001", "0.002"]}
    assert table["tags"] == {"git.commit": ["1" * 40, "2" * 40]}  # mlflow.user differs, but says nothing of lineage
    assert table["metrics"] == {"test_accuracy": [0.63, 0.6123456789]}
    every = compare.table([BASE, UNNAMED], show_all=True)
    assert every["params"]["train.reuters.epochs"] == ["10", "10"] and every["tags"]["host"] == ["h", "h"]
    assert "mlflow.user" not in every["tags"] and "pipeline.stage" not in every["tags"]


def test_the_text_aligns_a_column_per_run_and_cuts_long_values():
    text = compare.as_text(compare.table([BASE, UNNAMED]), width=12)
    assert text.splitlines() == [
        "                             reuters-fit~  bbbbbbbb",
        "run id                       aaaaaaaa      bbbbbbbb",
        "[params]",
        "distribute.replicas          -             2",
        "train.reuters.learning_rate  0.001         0.002",
        "[tags]",
        "git.commit                   11111111111~  22222222222~",
        "[metrics]",
        "test_accuracy                0.63          0.612346",
    ]
    twins = compare.as_text(compare.table([BASE, run("c" * 32, "twin", BASE.data.params, BASE.data.tags, {})]))
    assert "[params] (none differ)" in twins.splitlines() and "[tags] (none differ)" in twins.splitlines()
    assert twins.splitlines()[-1] == "test_accuracy           0.63                              -"  # none for twin


def test_csv_is_a_row_per_value_and_json_the_table_itself():
    table = compare.table([BASE, UNNAMED])
    assert compare.render(table, "csv").splitlines() == [
        f"section,key,{'a' * 32},{'b' * 32}",
        "run,run_name,reuters-fit-1rep-float32-1111111,",
        "params,distribute.replicas,,2",
        "params,train.reuters.learning_rate,0.001,0.002",
        f"tags,git.commit,{'1' * 40},{'2' * 40}",
        "metrics,test_accuracy,0.63,0.6123456789",
    ]
    assert json.loads(compare.render(table, "json")) == table
    assert compare.render(table, "text") == compare.as_text(table) + "\n"


def test_fewer_than_two_runs_is_a_usage_error():
    with pytest.raises(ConfigError, match=r"^compare needs two runs or more$") as info:
        compare.compare(["reuters-fit-1rep-float32-1111111"])
    assert info.value.exit_code == 2
