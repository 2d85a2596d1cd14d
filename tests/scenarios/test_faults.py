"""Faults in real processes, for every stage: an output place that is full or read-only (a
real tmpfs, mounted by the test): one `error:` line, exit 1, nothing written there; SIGKILL at
the moment each stage's outputs are at risk, then a rerun that completes; the tracking server
gone during a training."""

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from support.datasets import reuters_files_of
from support.processes import run_pipeline, subprocess_env
from support.project import unlike_plain_files, write_params
from support.servers import free_ports, start_mlflow_server

pytestmark = [
    pytest.mark.slow,
    pytest.mark.faults,
    pytest.mark.skipif(os.geteuid() != 0, reason="mounts a tmpfs: needs root (CI runs as root)"),
]

STAGE_OUTPUTS = {
    "download": lambda o: ["--out", o / "raw", "--manifest", o / "raw.json"],
    "preprocess": lambda o: ["--raw", "raw", "--out", o / "prepared"],
    "train": lambda o: [
        "--data",
        "prepared",
        "--model-dir",
        o / "model",
        "--history",
        o / "history.csv",
        "--summary",
        o / "train.json",
        "--curves",
        o / "curves.png",
        "--measurements",
        o / "measurements.json",
        "--machine",
        o / "machine.json",
    ],
    "evaluate": lambda o: [
        "--data",
        "prepared",
        "--model-dir",
        "model",
        "--metrics",
        o / "metrics.json",
        "--per-class",
        o / "per_class.csv",
        "--confusion",
        o / "confusion.csv",
        "--confusion-png",
        o / "confusion.png",
    ],
}
OUTPUT_NAMES = {
    "download": ["raw", "raw.partial", "raw.json", "raw.sources.json"],
    "preprocess": ["prepared"],
    "train": ["model", "history.csv", "train.json", "curves.png", "measurements.json", "machine.json"],
    "evaluate": ["metrics.json", "per_class.csv", "confusion.csv", "confusion.png"],
}


@pytest.fixture(scope="module")
def project(tmp_path_factory, dataset_files):
    """A folder where every stage of the Reuters experiment has run once, on fixture data."""
    root = tmp_path_factory.mktemp("faults")
    write_params(root, {"train.reuters.epochs": 3, "download.reuters.files": reuters_files_of(dataset_files)})
    env = subprocess_env(
        PIPELINE_DATA_MIRROR=dataset_files.as_uri(), MLFLOW_TRACKING_URI=f"sqlite:///{root / 'mlflow.db'}"
    )
    old = os.umask(0o002)  # a group-shared umask: the modes test below checks what it gives
    try:
        for stage, outputs in STAGE_OUTPUTS.items():
            result = run_pipeline(stage, "reuters", *outputs(root), cwd=root, env=env)
            assert result.returncode == 0, result.stderr
    finally:
        os.umask(old)
    return root, env


def test_under_umask_002_every_output_is_group_writable_like_a_file_the_user_makes(project, tmp_path):
    """mkstemp and mkdtemp make 0600 files and 0700 folders whatever the umask: each stage's
    outputs, the model folder and the prepared data get what `open()` and `mkdir()` give
    (0664, 0775 here; umask 022: tests/scenarios/test_e2e.py)."""
    root, env = project
    names = [
        str(Path(o).relative_to(root))
        for outputs in STAGE_OUTPUTS.values()
        for o in outputs(root)
        if isinstance(o, Path)
    ]
    assert unlike_plain_files(root, names, 0o002) == []
    shutil.copy(root / "params.yaml", tmp_path)
    old = os.umask(0o002)
    try:  # MNIST's prepared data: its own writer (decoded images)
        for stage, args in (
            ("download", ["--out", "raw", "--manifest", "raw.json"]),
            ("preprocess", ["--raw", "raw", "--out", "prepared"]),
        ):
            result = run_pipeline(stage, "mnist", *args, cwd=tmp_path, env=env)
            assert result.returncode == 0, result.stderr
    finally:
        os.umask(old)
    assert unlike_plain_files(tmp_path, ["raw", "raw.json", "prepared"], 0o002) == []


# Each stage with every input it reads: removed one at a time, the stage must end in one
# `error:` line having written nothing (its outputs here go to new paths under `new/`).
NEW_OUTPUTS = {
    "download": ["--out", "new/raw", "--manifest", "new/raw.json"],
    "preprocess": ["--raw", "raw", "--out", "new/prepared"],
    "train": [
        "--data",
        "prepared",
        "--model-dir",
        "new/model",
        "--history",
        "new/history.csv",
        "--summary",
        "new/train.json",
        "--curves",
        "new/curves.png",
        "--measurements",
        "new/measurements.json",
        "--machine",
        "new/machine.json",
    ],
    "evaluate": [
        "--data",
        "prepared",
        "--model-dir",
        "model",
        "--metrics",
        "new/metrics.json",
        "--per-class",
        "new/per_class.csv",
        "--confusion",
        "new/confusion.csv",
        "--confusion-png",
        "new/confusion.png",
    ],
}
READS = {
    "download": ["params:download.reuters"],
    "preprocess": ["raw/reuters.npz", "raw/reuters_word_index.json", "params:preprocess.reuters"],
    "train": [
        "prepared/train-00000-of-00001.bin",
        "prepared/val-00000-of-00001.bin",
        "prepared/stats.json",
        "params:train.reuters",
    ],
    "evaluate": [
        "prepared/test-00000-of-00001.bin",
        "prepared/stats.json",
        "prepared/reuters_word_index.json",
        "model/model.keras",
        "params:evaluate.reuters",
    ],
}  # not model/run.json: DVC keeps none (.dvcignore), and evaluate logs to a run of its own without it


def test_each_stage_without_each_input_it_reads_ends_in_one_line_having_written_nothing(project, tmp_path):
    """Each removed in a copy of the project, one at a time; each case a stage process of its own."""
    root, env = project
    for stage, inputs in READS.items():
        for missing in inputs:
            case = Path(
                shutil.copytree(
                    root,
                    tmp_path / f"{stage}-{len(list(tmp_path.iterdir()))}",
                    ignore=shutil.ignore_patterns("mlflow.db*", "place*", "new"),
                )
            )
            assert_one_line_and_nothing_written(case, stage, "reuters", missing, NEW_OUTPUTS[stage], env)


# MNIST's stages, in copies of the session's trained project (its data and model folders as
# `dvc repro` wrote them): the same check for the other dataset's files.
MNIST_NEW_OUTPUTS = {
    "download": ["--out", "new/raw", "--manifest", "new/raw.json"],
    "preprocess": ["--raw", "data/raw/mnist", "--out", "new/prepared"],
    "train": ["--data", "data/prepared/mnist", *NEW_OUTPUTS["train"][2:]],
    "evaluate": ["--data", "data/prepared/mnist", "--model-dir", "models/mnist", *NEW_OUTPUTS["evaluate"][4:]],
}
MNIST_READS = {
    "download": ["params:download.mnist"],
    "preprocess": ["data/raw/mnist/mnist_png.tar.gz", "params:preprocess.mnist"],
    "train": [
        "data/prepared/mnist/train-00000-of-00001.bin",
        "data/prepared/mnist/val-00000-of-00001.bin",
        "data/prepared/mnist/stats.json",
        "params:train.mnist",
    ],
    "evaluate": [
        "data/prepared/mnist/test-00000-of-00001.bin",
        "data/prepared/mnist/stats.json",
        "models/mnist/model.keras",
        "params:evaluate.mnist",
    ],
}


def test_each_mnist_stage_without_each_input_it_reads_ends_in_one_line_having_written_nothing(
    trained_project, tmp_path
):
    env = subprocess_env(MLFLOW_TRACKING_URI=f"sqlite:///{tmp_path / 'mlflow.db'}")
    for stage, inputs in MNIST_READS.items():
        for missing in inputs:
            case = tmp_path / f"{stage}-{len(list(tmp_path.iterdir()))}"
            for part in ("data/raw/mnist", "data/prepared/mnist", "models/mnist"):
                shutil.copytree(trained_project.path / part, case / part)
            shutil.copy(trained_project.path / "params.yaml", case)
            assert_one_line_and_nothing_written(case, stage, "mnist", missing, MNIST_NEW_OUTPUTS[stage], env)


def assert_one_line_and_nothing_written(case: Path, stage: str, dataset: str, missing: str, args: list, env: dict):
    """`missing` (a file, or `params:<section>.<dataset>`) removed from `case`, then the stage run
    there: one `error:` line naming it, exit 2 for params and 1 for a file, no output written."""
    if missing.startswith("params:"):
        section, name = missing.removeprefix("params:").split(".")
        raw = yaml.safe_load((case / "params.yaml").read_text())
        del raw[section][name]
        (case / "params.yaml").write_text(yaml.safe_dump(raw))
    else:
        (case / missing).unlink()
    done = run_pipeline(stage, dataset, *args, cwd=case, env=env)
    what = f"{stage} {dataset} without {missing}: "
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert done.returncode == (2 if missing.startswith("params:") else 1), what + done.stderr
    assert len(errors) == 1 and "Traceback" not in done.stderr, what + done.stderr
    # named: the params section, the file, or (one archive of any name) the folder it was in
    if missing.startswith("params:"):
        named = [missing.removeprefix("params:")]
    else:
        named = [Path(missing).name, f"{Path(missing).parent}:"]
    assert any(name in errors[0] for name in named), what + errors[0]
    written = sorted(str(p.relative_to(case)) for p in (case / "new").rglob("*")) if (case / "new").exists() else []
    assert written == [], what + f"wrote {written}"


@pytest.fixture
def mount(tmp_path):
    mounted: list[Path] = []

    def make(options: str):
        place = tmp_path / f"place{len(mounted)}"
        place.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(place)], check=True)
        mounted.append(place)
        return place

    yield make
    for place in mounted:
        subprocess.run(["umount", str(place)], check=True)


@pytest.mark.parametrize("stage", list(STAGE_OUTPUTS))
@pytest.mark.parametrize(
    "fault,options,reason",
    [
        ("full", "size=4k", "No space left on device"),
        ("read-only", "ro,size=1m", "Read-only file system"),
    ],
)
def test_an_output_place_that_cannot_take_the_output(project, mount, stage, fault, options, reason):
    root, env = project
    place = mount(options)
    result = run_pipeline(stage, "reuters", *STAGE_OUTPUTS[stage](place), cwd=root, env=env)
    assert result.returncode == 1, result.stderr
    (line,) = result.stderr.splitlines()
    # the output that failed, or the place when the library does not say which file
    named = line[len("error: ") : -len(f": cannot write: {reason}")]
    assert line == f"error: {named}: cannot write: {reason}", line
    assert named == str(place) or named in {str(place / n) for n in OUTPUT_NAMES[stage]}, line
    assert list(place.iterdir()) == []  # nothing half-written, no temporary file


# One SIGKILL per stage, at the moment its outputs are at risk, then the same command again: it
# completes, its outputs are the ones an uninterrupted run writes, and no temporary is left.
# The moments, and why each matters:
KILL_WHEN = {
    # mid-transfer, over a slow link: a partial file sits in the staging folder; the rerun must
    # resume it or start it over, and check every sha256 before anything appears at the output
    "download": "raw.partial/*.part",
    # while the prepared arrays are written into their temporary folder: the rerun must clear
    # it, and the output appears whole or not at all
    "preprocess": ".prepared.*.tmp",
    # after the last epoch, while the model and reports are written: every epoch is in the
    # backup, so the rerun trains none, writes the outputs and finishes the same MLflow run;
    # no run is left RUNNING, and each has each epoch once
    "train": ".*.tmp",
    # between the first report file and the last (the confusion matrix's PNG is drawn last):
    # the four outputs are one set, written again whole, never half old and half new
    "evaluate": ".*.tmp",
}
# The train stage's other moment, mid-epoch after a backup, is tests/training/test_resume.py's (both
# loops: the rerun resumes in the same MLflow run); tests/scenarios/test_multiworker.py kills a worker.


def outputs_of(folder: Path) -> dict:
    """Every file under `folder`, by relative path -> bytes (hidden temporaries included)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def run_killed_when(stage, args, cwd, env, out: Path, pattern: str) -> bool:
    """Run the stage; SIGKILL it as soon as something matching `pattern` (a glob under `out`)
    exists. Whether it was killed at that moment: False when it ended first, or when what matched
    was gone once the kill landed (a loaded machine can let the stage move past its moment between
    the look and the kill: a temporary renamed into place is the output, not a fault)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "pipeline", stage, "reuters", *map(str, args)],
        cwd=cwd,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    while proc.poll() is None:
        if out.is_dir() and any(out.glob(pattern)):
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return any(out.glob(pattern))
        time.sleep(0.001)
    return False


@pytest.fixture(scope="module")
def large_raw(project):
    """Reuters files with 3,000 newswires: writing their arrays takes long enough to be caught."""
    from support.datasets import make_reuters_npz, make_word_index

    root, _ = project
    raw = root / "raw-large"
    raw.mkdir()
    make_reuters_npz(raw / "reuters.npz", n=3000)
    make_word_index(raw / "reuters_word_index.json")
    return raw


@pytest.mark.cold_start  # the SIGKILL reaches the stage's own process at that moment
@pytest.mark.parametrize("stage", list(KILL_WHEN))
def test_sigkill_at_the_moment_that_matters_then_rerun(project, large_raw, dataset_files, tmp_path, stage):
    from support.datasets import FileServer

    root, base_env = project
    store = tmp_path / "mlflow.db"
    extra = ["--backup-dir", tmp_path / "backup"] if stage == "train" else []
    args = {"preprocess": lambda o: ["--raw", large_raw, "--out", o / "prepared"]}.get(
        stage, lambda o: [*STAGE_OUTPUTS[stage](o), *extra]
    )
    with FileServer(dataset_files, chunk_delay=0.05) as slow:
        env = {**base_env, "PIPELINE_DATA_MIRROR": slow.url, "MLFLOW_TRACKING_URI": f"sqlite:///{store}"}
        reference = tmp_path / "reference"
        done = run_pipeline(stage, "reuters", *args(reference), cwd=root, env=env)
        assert done.returncode == 0, done.stderr
        for attempt in range(3):  # the moment lasts milliseconds for preprocess: rarely missed twice
            out = tmp_path / f"out{attempt}"
            if run_killed_when(stage, args(out), root, env, out, KILL_WHEN[stage]):
                break
        else:
            pytest.fail(f"{stage}: three runs were past {KILL_WHEN[stage]} before the kill landed")
        print(f"{stage}: killed in run {attempt + 1} when {KILL_WHEN[stage]} appeared")
        outputs = out / "raw" if stage == "download" else out  # beside the staging folder, or the temporaries
        assert not list(outputs.glob("[!.]*")), "an output appeared before the kill's moment"
        rerun = run_pipeline(stage, "reuters", *args(out), cwd=root, env=env)
        assert rerun.returncode == 0, rerun.stderr
    got, want = outputs_of(out), outputs_of(reference)
    assert sorted(got) == sorted(want)  # every output, and no temporary file
    assert not [p for p in out.parent.iterdir() if p.name.startswith(f".out{attempt}") or p.name.endswith(".partial")]
    if stage == "evaluate":
        assert got["metrics.json"] == want["metrics.json"] and got["confusion.csv"] == want["confusion.csv"]
    elif stage == "train":
        history = (out / "history.csv").read_text().splitlines()
        assert [line.split(",")[0] for line in history[1:]] == ["1", "2", "3"]
        from mlflow import MlflowClient

        client = MlflowClient(f"sqlite:///{store}")
        experiment = client.get_experiment_by_name("reuters")
        assert experiment is not None
        runs = client.search_runs([experiment.experiment_id])
        # the reference's, and the killed one's, which the rerun finished
        assert [r.info.status for r in runs] == ["FINISHED"] * 2, [(r.info.run_id, r.info.status) for r in runs]
        for run in runs:
            steps = [m.step for m in client.get_metric_history(run.info.run_id, "loss")]
            assert sorted(steps) == [1, 2, 3], steps  # each epoch once
    else:
        assert got == want  # byte for byte


def train_until_two_epochs_logged(root, folder, out, env):
    """Start the train stage (params and backup in `folder`, outputs in `out`) and return
    (process, its arguments) once its MLflow run has two epochs."""
    from mlflow import MlflowClient

    args = [
        sys.executable,
        "-m",
        "pipeline",
        "train",
        "reuters",
        "--params",
        str(folder / "params.yaml"),
        *map(str, STAGE_OUTPUTS["train"](out)),
        "--backup-dir",
        str(folder / "backup"),
    ]
    train = subprocess.Popen(args, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    client = MlflowClient(env["MLFLOW_TRACKING_URI"])
    deadline = time.time() + 300
    while True:
        experiment = client.get_experiment_by_name("reuters")
        runs = client.search_runs([experiment.experiment_id]) if experiment else []
        if runs and len(client.get_metric_history(runs[0].info.run_id, "loss")) >= 2:
            return train, args
        assert train.poll() is None and time.time() < deadline, train.communicate()
        time.sleep(0.3)


def test_the_tracking_server_stopped_mid_training_and_started_again(project, tmp_path):
    """A training must not be lost because tracking blinked: the epochs logged while the
    server was down reach it once it is back (MLflow's client retries), the stage ends well."""
    from mlflow import MlflowClient

    root, base_env = project
    (port,) = free_ports(1)
    server, url = start_mlflow_server(tmp_path, port)
    env = {**base_env, "MLFLOW_TRACKING_URI": url}
    write_params(tmp_path, {"train.reuters.epochs": 8, "train.reuters.early_stopping.patience": None})  # every epoch
    out = tmp_path / "out"
    train, _ = train_until_two_epochs_logged(root, tmp_path, out, env)
    client = MlflowClient(url)
    server.terminate()
    server.wait(timeout=30)
    down = time.time()
    time.sleep(12)
    server, url = start_mlflow_server(tmp_path, port)
    print(f"tracking server down for {time.time() - down:.1f} s")
    try:
        stdout, stderr = train.communicate(timeout=600)
        assert train.returncode == 0, stderr
        experiment = client.get_experiment_by_name("reuters")
        assert experiment is not None
        (run,) = client.search_runs([experiment.experiment_id])
        assert run.info.status == "FINISHED"
        steps = [m.step for m in client.get_metric_history(run.info.run_id, "loss")]
        assert sorted(steps) == list(range(1, 9))  # every epoch, once
        assert (out / "model" / "model.keras").is_file()
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_a_tracking_server_gone_for_longer_than_mlflow_retries(project, tmp_path):
    """MLflow gives up (here after no retry): the stage stops in one line saying what to do;
    run again once the server is back, it resumes from the backup and logs each epoch once."""
    from mlflow import MlflowClient

    root, base_env = project
    (port,) = free_ports(1)
    server, url = start_mlflow_server(tmp_path, port)
    env = {
        **base_env,
        "MLFLOW_TRACKING_URI": url,
        "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0",
        "MLFLOW_HTTP_REQUEST_TIMEOUT": "5",
    }
    write_params(tmp_path, {"train.reuters.epochs": 6, "train.reuters.early_stopping.patience": None})
    out = tmp_path / "out"
    train, args = train_until_two_epochs_logged(root, tmp_path, out, env)
    client = MlflowClient(url)
    server.terminate()
    server.wait(timeout=30)
    _, stderr = train.communicate(timeout=600)
    assert train.returncode == 1
    assert len(stderr.splitlines()) == 1, stderr
    (line,) = stderr.splitlines()
    assert line.startswith(f"error: {url}: logging an epoch's metrics failed: Connection refused; ") and line.endswith(
        "run the stage again once the tracking store answers (a training resumes from its backup and logs "
        "each epoch once)"
    ), line
    assert not out.exists()
    server, url = start_mlflow_server(tmp_path, port)
    try:
        again = subprocess.run(args, cwd=root, env=env, capture_output=True, text=True, timeout=600)
        assert again.returncode == 0, again.stderr
        experiment = client.get_experiment_by_name("reuters")
        assert experiment is not None
        (run,) = client.search_runs([experiment.experiment_id])
        assert run.info.status == "FINISHED"
        steps = [m.step for m in client.get_metric_history(run.info.run_id, "loss")]
        assert sorted(steps) == list(range(1, 7))
    finally:
        server.terminate()
        server.wait(timeout=30)
