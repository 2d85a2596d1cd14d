"""`pipeline add` (pipeline/commands/add.py) on copies of the repository's own params.yaml and
dvc.yaml: a dataset declared in both from its kind's template (the file still the fixed point of
`pipeline params --rewrite`, dvc.yaml's comments and flow lists kept), each setting it reads from
the data said with the figure it chose it from, taken out again by `pipeline remove` to the same
bytes, every refusal one `error:` line, exit 2, both files untouched; adds and removes run at once
(the lock: tests/config/commands/test_declare.py)."""

import re
import shlex
from pathlib import Path

import pytest
import yaml
from pytest_codeblocks import extract_from_file
from support.datasets import make_mnist_archive
from support.processes import run_command, subprocess_env
from support.project import ROOT

from pipeline.config.commands.params_doc import format_params
from pipeline.config.loading import loader
from pipeline.config.loading.loader import ParamsLoader, read_yaml
from pipeline.kinds.image_folders import ImageFoldersPreprocessConfig
from pipeline.kinds.labelled_texts import TextTablePreprocessConfig
from pipeline.kinds.tables import TablePreprocessConfig

URL = "https://data.example.com/shapes.tar.gz"


@pytest.fixture
def project(tmp_path) -> Path:
    """A copy of the params file and dvc.yaml, and beside them the files the URLs here name, in
    served/, which each command reads as its mirror: the pictures of shapes.tar.gz (28 px, grey,
    three of each class for training) and the texts of topics.csv (a text and a topic column)."""
    for name in ("params.yaml", "dvc.yaml"):
        (tmp_path / name).write_bytes((ROOT / name).read_bytes())
    (tmp_path / "served").mkdir()
    make_mnist_archive(tmp_path / "served" / "shapes.tar.gz", per_class=(3, 1), splits=("train", "test"), top="shapes")
    write_texts(tmp_path / "served" / "topics.csv", "text", "topic")
    return tmp_path


def write_texts(path: Path, text_column: str, label_column: str) -> Path:
    """A CSV of texts of three topics, twice as many about sport as about each other topic."""
    rows = [
        ("the match ended with a late goal", "sport"),
        ("the team won the cup final", "sport"),
        ("a late goal won the match for the team", "sport"),
        ("the final whistle and a goal", "sport"),
        ("rain and wind all day", "weather"),
        ("a sunny day with some wind", "weather"),
        ("bake the bread for an hour", "cooking"),
        ("stir the soup and bake the bread", "cooking"),
    ]
    lines = [f"{text_column},{label_column}", *(f"{text},{label}" for text, label in rows)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def pipeline(project: Path, *args: str):
    """`pipeline ARGS` in `project`, its files looked up in served/ first: (exit code, stdout,
    stderr lines); it must not import TensorFlow."""
    env = subprocess_env(PIPELINE_DATA_MIRROR=(project / "served").as_uri())
    result, code, imported = run_command(list(args), cwd=project, env=env)
    assert "tensorflow" not in imported and "mlflow" not in imported
    return code, result.stdout, result.stderr.splitlines()


def files(project: Path) -> tuple[bytes, bytes]:
    return (project / "params.yaml").read_bytes(), (project / "dvc.yaml").read_bytes()


def test_add_declares_a_dataset_of_image_folders_in_both_files(project):
    code, out, err = pipeline(project, "add", "shapes", "--kind", "image_folders", "--url", URL)
    assert (code, err) == (0, [])
    assert out.splitlines() == [
        f"read {URL}:",
        "  preprocess.shapes.image_size: 32 (the median side of all 40 pictures is 28 px, within 32 to 48)",
        "  train.shapes.epochs: 150 (20 training pictures: 3,000 epochs to see 60,000, within 30 to 150)",
        "  preprocess.shapes.color: grey (0 of all 40 pictures have colour)",
        "  train.shapes.class_weight: none, the template's (the classes have 3 to 3 training pictures (1.0x); "
        "balanced weighs each class by its size, for the small classes)",
        "added shapes (image_folders) to params.yaml and dvc.yaml: dvc repro evaluate@shapes",
    ]
    assert loader.names(project / "params.yaml") == ["reuters", "mnist", "shapes"]
    params = loader.load_params(project / "params.yaml", "shapes")
    raw = params.raw
    template = raw["add"]["image_folders"]
    # the data's colour (grey) is the template's; the template's class_weight (none) stands
    chosen: dict[str, dict] = {"preprocess": {"image_size": 32}, "train": {"epochs": 150}}
    for stage in template:
        assert list(raw[stage])[-1] == "shapes"  # after the datasets there
        assert stage in ("download", "tune") or raw[stage]["shapes"] == {**template[stage], **chosen.get(stage, {})}
    assert {**raw["tune"]["shapes"], "study": None} == template["tune"]
    assert [(f.url, f.sha256) for f in params.download.files] == [(URL, None)]
    assert (params.preprocess.kind, params.preprocess.reader, params.tune.study) == (
        "image_folders",
        "folders",
        "shapes",
    )
    text = (project / "params.yaml").read_text()
    assert text == format_params(yaml.load(text, Loader=ParamsLoader))  # the form `dvc exp run -S` writes
    code, out, _ = pipeline(project, "params", "--rewrite")
    assert (code, out) == (0, "params.yaml: already in the form `dvc exp run -S` writes\n")
    original = (ROOT / "dvc.yaml").read_text()
    added = (project / "dvc.yaml").read_text()
    assert added.replace("foreach: [reuters, mnist, shapes]", "foreach: [reuters, mnist]") == original.replace(
        "  - reports/mnist/measurements.json\n",
        "  - reports/mnist/measurements.json\n  - reports/shapes/measurements.json\n",
    ) + (
        "  - shapes accuracy:\n      x: epoch\n      y:\n        reports/shapes/history.csv: [accuracy, val_accuracy]\n"
        "  - shapes loss:\n      x: epoch\n      y:\n        reports/shapes/history.csv: [loss, val_loss]\n"
    )
    assert added.count("foreach: [reuters, mnist, shapes]") == 4


def test_photos_start_from_imagenet_weights_listed_as_a_download_and_texts_take_no_photos(project):
    code, out, err = pipeline(project, "add", "flowers", "--kind", "image_folders", "--photos", "--url", URL)
    assert (code, err) == (0, [])
    assert out.splitlines()[-1] == (
        "added flowers (image_folders, photos) to params.yaml and dvc.yaml: dvc repro evaluate@flowers"
    )
    params = loader.load_params(project / "params.yaml", "flowers")
    assert (params.train.model, params.train.settings.weights) == ("mobilenet_v2", "imagenet")
    (weights,) = params.download.pretrained
    assert weights.url.endswith("/mobilenet_v2_weights_tf_dim_ordering_tf_kernels_1.0_160_no_top.h5")
    assert isinstance(params.preprocess, ImageFoldersPreprocessConfig)
    assert params.preprocess.image_size == params.train.settings.img_size == 160
    before = files(project)
    code, _, err = pipeline(project, "add", "notes", "--kind", "labelled_texts", "--photos", "--url", URL)
    assert (code, err) == (2, ["error: --photos: a template of image_folders, and --kind is labelled_texts"])
    assert files(project) == before


def test_add_sets_the_sha256_and_each_override_and_remove_gives_back_the_same_bytes(project):
    before = files(project)
    sha = "ab" * 32
    code, out, err = pipeline(
        project,
        "add",
        "topics",
        "--kind",
        "labelled_texts",
        "--url",
        write_texts(project / "topics.csv", "summary", "label").as_uri(),
        "--sha256",
        sha,
        "-S",
        "preprocess.topics.text_column=summary",
        "--set",
        "train.topics.epochs=12",
    )
    assert (code, err) == (0, []), err
    params = loader.load_params(project / "params.yaml", "topics")
    assert isinstance(params.preprocess, TextTablePreprocessConfig) and params.preprocess.text_column == "summary"
    assert (params.download.files[0].sha256, params.train.epochs) == (sha, 12)
    code, out, err = pipeline(project, "add", "shapes", "--kind", "image_folders", "--url", URL)
    assert code == 0 and loader.names(project / "params.yaml") == ["reuters", "mnist", "topics", "shapes"]
    for name in ("topics", "shapes"):
        code, out, err = pipeline(project, "remove", name)
        assert (code, err) == (0, [])
        assert out.splitlines()[0] == f"removed {name} from params.yaml and dvc.yaml"
        assert out.splitlines()[1].startswith(f"left alone: data/raw/{name}, data/prepared/{name}, models/{name}")
    assert files(project) == before


OK = ["shapes", "--kind", "image_folders", "--url", URL]


@pytest.mark.parametrize(
    "args, line",
    [
        (
            ["add", "mnist", "--kind", "image_folders", "--url", URL],
            "params.yaml: download.mnist: already declared (`pipeline remove mnist` takes it out)",
        ),
        (
            ["add", "MNIST", "--kind", "image_folders", "--url", URL],
            "params.yaml: download.MNIST: expected a dataset name apart from download.mnist by more than case",
        ),
        (
            ["add", "my data", "--kind", "image_folders", "--url", URL],
            "NAME 'my data': expected a dataset name of 1 to 64 ASCII letters, digits, '_' or '-', starting with a "
            "letter or '_': ' ' is not one of them",
        ),
        (["add", "yes", "--kind", "image_folders", "--url", URL], "NAME 'yes': expected a dataset name of"),
        (["add", *OK[:2], "images", *OK[3:]], "pipeline add: Invalid value for '--kind': 'images' is not one of"),
        (["add", *OK[:4], "ftp://data.example.com/s.zip"], "--url ftp://data.example.com/s.zip: expected an http://"),
        (["add", *OK, "--sha256", "abc"], "--sha256 abc: expected a 64-digit hex sha256"),
        (
            ["add", *OK, "-S", "train.shapes.epoch=3"],
            "-S train.shapes.epoch=3: params.yaml has no key 'epoch' under train.shapes (did you mean 'epochs'?)",
        ),
        (
            ["add", *OK, "-S", "train.reuters.epochs=3"],
            "-S train.reuters.epochs=3: `pipeline add` sets the new dataset's keys: <stage>.shapes.<key>=<value>",
        ),
        (["add", *OK, "-S", "train.shapes.epochs=0"], "params.yaml: train.shapes.epochs: expected a positive integer"),
        (
            ["add", *OK, "-S", "preprocess.shapes.validation_split=0"],
            "params.yaml: train.shapes.early_stopping.monitor: val_loss needs a validation split",
        ),
        (["add", *OK, "-S", "serve.shapes.top_k=x"], "params.yaml: serve.shapes.top_k: expected a positive integer"),
        (["add", *OK[:3]], "pipeline add: Missing option '--url'."),
    ],
)
def test_a_refusal_is_one_line_and_changes_neither_file(project, args, line):
    before = files(project)
    code, out, err = pipeline(project, *args)
    assert (code, out, len(err)) == (2, "", 1), err
    assert err[0].startswith(f"error: {line}"), err
    assert files(project) == before


def test_a_dvc_yaml_that_cannot_take_the_dataset_changes_neither_file(project):
    text = re.sub(r"^metrics:\n(  - .*\n)+", "metrics: 3\n", (project / "dvc.yaml").read_text(), flags=re.M)
    (project / "dvc.yaml").write_text(text)
    before = files(project)
    code, _, err = pipeline(project, "add", *OK)
    assert (code, err) == (2, ["error: dvc.yaml: metrics: expected a list, got int"])
    assert files(project) == before
    (project / "dvc.yaml").unlink()
    code, _, err = pipeline(project, "add", *OK)
    assert code == 2 and err[0].startswith("error: dvc.yaml: file not found:")
    assert (project / "params.yaml").read_bytes() == before[0]


def test_a_template_missing_from_the_params_file_is_named(project):
    raw = read_yaml(project / "params.yaml")
    del raw["add"]["labelled_texts"]
    (project / "params.yaml").write_text(format_params(raw))
    code, _, err = pipeline(project, "add", "topics", "--kind", "labelled_texts", "--url", URL)
    assert (code, err) == (
        2,
        [
            "error: params.yaml: add.labelled_texts: missing: the sections a new labelled_texts dataset starts with "
            "(docs/own-data.md)"
        ],
    )


def test_a_template_the_params_file_holds_wrong_is_named(project):
    """The templates are checked with the datasets (as `pipeline params` checks them): one a new
    dataset could not start from is refused, whichever kind is added."""
    raw = read_yaml(project / "params.yaml")
    raw["add"]["labelled_texts"]["train"]["epochs"] = 0
    (project / "params.yaml").write_text(format_params(raw))
    before = files(project)
    code, _, err = pipeline(project, "add", *OK)
    assert (code, err) == (
        2,
        ["error: params.yaml: add.labelled_texts.train.epochs: expected a positive integer, got 0"],
    )
    assert files(project) == before


def test_own_data_pages_commands_add_and_remove_a_dataset(project):
    """docs/own-data.md's first block: each `pipeline` line of it, run as it stands."""
    (block,) = [b for b in extract_from_file(ROOT / "docs" / "own-data.md") if b.syntax == "bash"][:1]
    lines = [line for line in block.code.splitlines() if line.startswith("pipeline ")]
    assert [line.split()[1] for line in lines][:2] == ["add", "add"]
    for line in lines:
        code, _, err = pipeline(project, *shlex.split(line)[1:])
        assert (code, err) == (0, []), (line, err)
    assert loader.names(project / "params.yaml")[2:] == ["shapes", "topics"]


def test_add_takes_the_shared_options_and_its_help_imports_no_tensorflow():
    result, code, imported = run_command(["add", "--help"])
    assert (code, imported) == (0, set()) and "--params" in result.stdout
    assert "-S, --set KEY=VALUE" in result.stdout and "--kind [labelled_texts|image_folders|tables]" in result.stdout


def test_a_setting_given_with_s_wins_over_the_one_read_from_the_data(project):
    code, out, err = pipeline(project, "add", *OK, "-S", "preprocess.shapes.image_size=48")
    assert (code, err) == (0, [])
    assert (
        "  preprocess.shapes.image_size: as -S sets it, not 32 (the median side of all 40 pictures is 28 px, within "
        "32 to 48)" in out.splitlines()
    )
    preprocess = loader.load_params(project / "params.yaml", "shapes").preprocess
    assert isinstance(preprocess, ImageFoldersPreprocessConfig) and preprocess.image_size == 48


def test_the_templates_class_weight_stands_beside_the_classes_spread(project):
    """class_weight is not chosen from the data: a template that weighs, weighs; -S still wins."""
    text = (project / "params.yaml").read_text()
    template = text.index("\n  image_folders:\n", text.index("\nadd:\n"))
    at = text.index("class_weight: none", template)
    (project / "params.yaml").write_text(text[:at] + "class_weight: balanced" + text[at + len("class_weight: none") :])
    code, out, err = pipeline(project, "add", *OK)
    assert (code, err) == (0, [])
    line = next(line for line in out.splitlines() if "class_weight" in line)
    assert line.startswith("  train.shapes.class_weight: balanced, the template's (the classes have 3 to 3 ")
    assert loader.load_params(project / "params.yaml", "shapes").train.class_weight == "balanced"
    assert pipeline(project, "remove", "shapes")[0] == 0
    code, out, err = pipeline(project, "add", *OK, "-S", "train.shapes.class_weight=none")
    assert (code, err) == (0, [])
    assert "  train.shapes.class_weight: as -S sets it (the classes have 3 to 3 " in out
    assert loader.load_params(project / "params.yaml", "shapes").train.class_weight == "none"


def test_texts_are_read_for_their_length_vocabulary_and_balance(project):
    code, out, err = pipeline(
        project, "add", "topics", "--kind", "labelled_texts", "--url", "https://data.example.com/topics.csv",
        "-S", "preprocess.topics.label_column=topic",
    )  # fmt: skip
    assert (code, err) == (0, [])
    assert out.splitlines()[1:5] == [
        "  preprocess.topics.max_len: 16 (99% of the 8 texts have 10 words or fewer, the longest 10 "
        "(the start mark counted), rounded up to a multiple of 8)",
        "  preprocess.topics.num_words: 30 (the texts hold 26 words: every one, after ids 0 to 3 for the marks)",
        "  train.topics.mlp.l2: 0.083 (about 6 training texts: 1 / (2 C n) for a linear SVM's C = 1)",
        "  train.topics.class_weight: none, the template's (the classes have 2 to 4 texts (2.0x); "
        "balanced weighs each class by its size, for the small classes)",
    ]
    params = loader.load_params(project / "params.yaml", "topics")
    assert isinstance(params.preprocess, TextTablePreprocessConfig)
    assert (params.preprocess.max_len, params.preprocess.num_words, params.train.class_weight) == (16, 30, "none")
    assert params.train.settings.l2 == 0.083  # written where the model's settings are


def test_a_table_is_read_for_what_each_column_is(project):
    lines = ["customer,age,plan,signed,churned"]
    lines += [
        f"c{i},{20 + i % 40},{'abc'[i % 3]},2024-02-{i % 28 + 1:02d},{'yes' if i % 4 == 0 else 'no'}" for i in range(60)
    ]
    (project / "served" / "customers.csv").write_text("\n".join(lines) + "\n")
    code, out, err = pipeline(
        project, "add", "churn", "--kind", "tables", "--url", "https://data.example.com/customers.csv",
        "-S", "preprocess.churn.label_column=churned",
    )  # fmt: skip
    assert (code, err) == (0, [])
    assert out.splitlines()[1:4] == [
        "  preprocess.churn.categorical: [plan] (categories: plan: 3 values; numbers: age)",
        "  preprocess.churn.ignore: [customer, signed] (what identifies a row: customer: 60 different values in 60 "
        "rows; signed: a date on every row)",
        "  train.churn.class_weight: none, the template's (the classes have 15 to 45 rows (3.0x); "
        "balanced weighs each class by its size, for the small classes)",
    ]
    assert out.splitlines()[-1].startswith("added churn (tables) to ")
    params = loader.load_params(project / "params.yaml", "churn")
    assert isinstance(params.preprocess, TablePreprocessConfig)
    assert (params.preprocess.categorical, params.preprocess.ignore) == (("plan",), ("customer", "signed"))
    assert params.train.model == "table_mlp"


@pytest.mark.parametrize(
    "name, content, line",
    [
        ("shapes.tar.gz", b"not an archive", "error: "),
        ("topics.csv", b"text,topic\n", "error: "),
    ],
)
def test_a_dataset_it_cannot_read_is_one_error_line_and_nothing_written(project, name, content, line):
    (project / "served" / name).write_bytes(content)
    kind = "image_folders" if name.startswith("shapes") else "labelled_texts"
    before = files(project)
    code, out, err = pipeline(project, "add", "new", "--kind", kind, "--url", f"https://data.example.com/{name}")
    assert (code, out, len(err)) == (1, "", 1), err
    assert err[0].startswith(line) and name in err[0], err
    assert files(project) == before


def test_a_folder_of_image_folders_is_read_where_the_download_stage_copies_it(project, tmp_path):
    """--url file:///.../pictures (a folder, not an archive): read as the download stage's copy of
    it, data/raw/<name>/pictures/{train,test}/<class>/..., will be."""
    import tarfile

    with tarfile.open(project / "served" / "shapes.tar.gz") as archive:
        archive.extractall(tmp_path / "unpacked", filter="data")
    folder = tmp_path / "unpacked" / "shapes"
    code, out, err = pipeline(project, "add", "pictures", "--kind", "image_folders", "--url", folder.as_uri())
    assert (code, err) == (0, [])
    assert out.splitlines()[1] == (
        "  preprocess.pictures.image_size: 32 (the median side of all 40 pictures is 28 px, within 32 to 48)"
    )


def test_a_folder_holding_a_table_is_read_where_the_download_stage_copies_it(project, tmp_path):
    """--url file:///.../exports (a folder holding one table): read as the download stage's copy
    of it, data/raw/<name>/exports/topics.csv, will be."""
    (tmp_path / "exports").mkdir()
    (tmp_path / "exports" / "topics.csv").write_bytes((project / "served" / "topics.csv").read_bytes())
    url = (tmp_path / "exports").as_uri()
    code, out, err = pipeline(project, "add", "topics", "--kind", "labelled_texts", "--url", url, "-S",
                              "preprocess.topics.label_column=topic")  # fmt: skip
    assert (code, err) == (0, [])
    assert out.splitlines()[1] == (
        "  preprocess.topics.max_len: 16 (99% of the 8 texts have 10 words or fewer, the longest 10 "
        "(the start mark counted), rounded up to a multiple of 8)"
    )


@pytest.mark.parametrize("at_once", [2, 4, 8])
def test_adds_and_removes_run_at_once_keep_every_dataset(project, at_once):
    """Real processes started together: each waits its turn on the lock, then applies its change
    to what the one before wrote; none is lost from either file."""
    import subprocess
    import sys

    env = subprocess_env(PIPELINE_DATA_MIRROR=(project / "served").as_uri())

    def start(*args: str) -> subprocess.Popen:
        argv = [sys.executable, "-m", "pipeline", *args]
        return subprocess.Popen(argv, cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    names = [f"topics{i}" for i in range(at_once)]
    url = "https://data.example.com/topics.csv"
    label = "preprocess.{}.label_column=topic"
    procs = [start("add", name, "--kind", "labelled_texts", "--url", url, "-S", label.format(name)) for name in names]
    if at_once > 2:  # and a removal among them
        procs.append(start("remove", "mnist"))
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert (proc.returncode, err) == (0, ""), (out, err)
    kept = ["reuters", *([] if at_once > 2 else ["mnist"])]
    declared = loader.names(project / "params.yaml")
    assert declared[: len(kept)] == kept and sorted(declared[len(kept) :]) == names
    stages = yaml.safe_load((project / "dvc.yaml").read_text())["stages"]
    assert all(sorted(spec["foreach"]) == sorted(declared) for spec in stages.values())
