"""The MLflow UI as a user meets it, in a real headless Chromium: a learning-rate sweep's runs,
made by pipeline.tracking into a sqlite store that a real `mlflow server` on 127.0.0.1
serves. Faster than test_e2e.py's (no training): the runs hold what the stages log about
their source, data and results."""

import json
import urllib.parse

import pytest
from support.processes import child_json, run_python, subprocess_env
from support.servers import CHROMIUM, CHROMIUM_ARGS, free_ports, start_mlflow_server

pytestmark = [pytest.mark.slow, pytest.mark.browser]

RATES = (0.001, 0.002, 0.005)

# Three trainings of a `dvc exp run` sweep, logged as the train and evaluate stages do (the
# framework's version tags apart: importing TensorFlow is not what this is about).
MAKE_RUNS = """
import json, os, sys
from pathlib import Path
from types import SimpleNamespace
import numpy as np
import mlflow
from pipeline.data import prepared
from pipeline.kinds.labelled_texts import full_length_facts
from pipeline.tracking import lineage, runs

lineage.framework_tags = lambda: {}
data = Path("data/prepared/reuters")
x, y = np.zeros((8, 4), dtype="int32"), (np.arange(8) % 2).astype("int32")
found = prepared.write_arrays(
    data, {"train": (x, y), "val": (x, y), "test": (x, y)}, input_="sequences", class_names=["a", "b"],
    facts=full_length_facts(4, 10),
)
ids = {}
for rate in json.loads(sys.argv[1]):
    os.environ["DVC_EXP_NAME"] = f"lr-{rate}"
    params = SimpleNamespace(
        dataset="reuters",
        flat=lambda: {"train.reuters.learning_rate": rate},
        unpinned=lambda: [],
        train=SimpleNamespace(class_weight="none"),
    )
    with runs.TrainingRun.open("reuters", "reuters-fit-1rep-float32") as run:
        run.log_setup(params, {"replicas": 1}, found)
        run.log_epoch(1, {"epoch": 1, "loss": 1.0, "val_accuracy": 0.5})
        lineage.log_inputs("reuters", found, ("test",))
        mlflow.log_metric("test_accuracy", 0.6 + 10 * rate)
    ids[f"lr-{rate}"] = run.run_id
print(json.dumps({"experiment_id": run.ids["experiment_id"], "runs": ids}))
"""


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    root = tmp_path_factory.mktemp("ui")
    made = run_python(
        MAKE_RUNS.replace("sys.argv[1]", repr(json.dumps(RATES))),
        cwd=root,
        env=subprocess_env(MLFLOW_TRACKING_URI=f"sqlite:///{root / 'mlflow.db'}", DVC_STAGE="train@reuters"),
    )
    assert made.returncode == 0, made.stderr[-3000:]
    proc, url = start_mlflow_server(root, free_ports(1)[0])  # on the same mlflow.db
    yield {"url": url, **child_json(made, last_line=True)}
    proc.terminate()
    proc.wait(timeout=30)


@pytest.fixture
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


def new_page(browser):
    """A browser that never opened MLflow (no saved choices)."""
    return browser.new_context(viewport={"width": 1600, "height": 1000}).new_page()


def cell(page, row: int, column: str) -> str:
    """The text of the runs table's `column` (`Source`, `Dataset`...) in row `row` (from 0)."""
    return page.locator(f'[role=row][row-index="{row}"] [col-id="{column}"]').first.inner_text()


def click_past_tips(page, target, seconds: float = 60) -> None:
    """Click `target` as a user would: first "Got it" on any first-visit tip that covers the
    page (MLflow draws it a moment after the page, sooner or later on a busy machine)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    got_it = page.get_by_text("Got it", exact=True)
    for _ in range(int(seconds / 2)):
        if got_it.count():
            got_it.first.click()
        try:
            target.click(timeout=2_000)
            return
        except PlaywrightTimeout:  # covered by a tip that came after the check
            continue
    target.click(timeout=2_000)  # its error says what covers it


def side_nav(page) -> list[str]:
    return [t for t in page.locator("nav a, aside a").all_inner_texts() if t]


def test_the_runs_link_opens_the_runs_table_with_source_and_datasets(sweep, browser):
    """What `pipeline ui` prints for an experiment (pipeline.tracking.store.RUNS_PAGE), in a browser that
    never opened MLflow: the runs table, the UI in its model-training mode; each run's Source
    is its DVC stage and its Dataset column names the prepared data it read."""
    from pipeline.tracking.store import RUNS_PAGE

    page = new_page(browser)
    page.goto(RUNS_PAGE.format(base=sweep["url"], id=sweep["experiment_id"]), wait_until="load")
    page.get_by_text("lr-0.005", exact=True).wait_for(timeout=60_000)
    assert f"#/experiments/{sweep['experiment_id']}/runs" in page.url
    nav = side_nav(page)
    assert "Runs" in nav and "Overview" not in nav, nav  # model training, not GenAI
    names = {cell(page, row, "attributes.`Run Name`").split("\n")[-1] for row in range(3)}
    assert names == {f"lr-{rate}" for rate in RATES}
    for row in range(3):
        assert cell(page, row, "attributes.`Source`") == "train@reuters"
        datasets = cell(page, row, "attributes.`Dataset`")
        for name, context in (
            ("reuters-train", "Training"),
            ("reuters-val", "Validation"),
            ("reuters-test", "Testing"),
        ):
            assert name in datasets and context in datasets, datasets


def test_an_experiment_opens_on_the_genai_overview_until_the_model_training_switch(sweep, browser):
    """MLflow 3.17 as it is (docs/mlflow.md says so): `#/experiments/<id>` opens on the GenAI
    overview in a browser that never chose, whatever the experiment's kind tag; once the
    user clicks "Model training", that browser opens experiments on their runs."""
    base, experiment = sweep["url"], sweep["experiment_id"]
    page = new_page(browser)
    page.goto(f"{base}/#/experiments/{experiment}", wait_until="load")
    page.wait_for_url("**/overview/**", timeout=60_000)
    page.get_by_text("Token Usage").first.wait_for(timeout=60_000)
    click_past_tips(page, page.get_by_text("Model training", exact=True).first)
    page.get_by_text("lr-0.001", exact=True).wait_for(timeout=60_000)
    page.goto(f"{base}/#/experiments/{experiment}", wait_until="load")  # the plain link again
    page.wait_for_url("**/runs?**", timeout=60_000)
    page.get_by_text("train@reuters").first.wait_for(timeout=60_000)
    assert "Overview" not in side_nav(page)


def test_a_sweep_in_the_runs_table_sorted_by_test_accuracy_with_its_param(sweep, browser):
    """docs/mlflow.md's way to read a sweep: Columns adds the swept param and test_accuracy,
    Sort orders the runs by test_accuracy, best first."""
    from pipeline.tracking.store import RUNS_PAGE

    page = new_page(browser)
    page.goto(RUNS_PAGE.format(base=sweep["url"], id=sweep["experiment_id"]), wait_until="load")
    page.get_by_text("lr-0.005", exact=True).wait_for(timeout=60_000)
    page.get_by_role("button", name="Close").click()  # the assistant's panel
    page.get_by_role("button", name="Columns").click()
    for name in ("test_accuracy", "train.reuters.learning_rate"):  # a tree of checkboxes
        page.get_by_text(name, exact=True).last.click()
    page.keyboard.press("Escape")
    page.get_by_role("button", name="Sort: Created").click()
    page.get_by_role("menuitemcheckbox", name="test_accuracy").click()
    page.wait_for_url("**orderByKey=metrics.*test_accuracy*", timeout=30_000)
    page.get_by_role("button", name="Sort: test_accuracy").wait_for(timeout=30_000)
    rows = [
        (cell(page, row, "params.`train.reuters.learning_rate`"), cell(page, row, "metrics.`test_accuracy`"))
        for row in range(3)
    ]
    assert rows == [("0.005", "0.65"), ("0.002", "0.62"), ("0.001", "0.61")], rows
    assert urllib.parse.unquote(page.url).count("orderByAsc=false") == 1
