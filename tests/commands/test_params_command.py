"""`pipeline params` (pipeline/commands/params.py): every key of the params file with its value
and meaning, without TensorFlow; one dataset's; the Markdown table; a config error in one line;
--rewrite of a hand-edited file; the `add` templates' keys after the datasets'."""

import re

import yaml
from support.processes import run_command, run_pipeline
from support.project import ROOT, write_params

from pipeline.config.commands.params_doc import describe, format_markdown, format_params
from pipeline.config.loading import templates
from pipeline.config.loading.loader import read_yaml

PARAMS = ROOT / "params.yaml"
NAMES = ["reuters", "mnist"]  # the datasets the shipped file declares, in its order


def test_params_command_prints_every_key_without_importing_tensorflow():
    result, code, imported = run_command(["params"])
    assert (code, "tensorflow" in imported) == (0, False), result.stderr
    docs = describe(read_yaml(PARAMS), NAMES)
    for doc in docs:
        assert re.search(rf"^{re.escape(doc.key)}:", result.stdout, re.M), doc.key
    assert "\ntrain.reuters.epochs: " in result.stdout and "\n    Passes over the training set." in result.stdout
    assert "preprocess.reuters.num_words: null\n" in result.stdout
    assert "PIPELINE_DATA_MIRROR" in result.stdout


def test_params_command_for_one_dataset_and_as_markdown():
    one = run_pipeline("params", "mnist")
    assert one.returncode == 0, one.stderr
    assert re.search(r"^train\.mnist\.mobilenet_v2\.img_size: ", one.stdout, re.M)
    assert not re.search(r"^\w+\.reuters\.", one.stdout, re.M)
    markdown = run_pipeline("params", "--markdown")  # docs/params.md's table (test_params_doc.py holds it to it)
    raw = read_yaml(PARAMS)
    assert markdown.returncode == 0 and markdown.stdout == format_markdown(describe(raw, NAMES, templates.kinds(raw)))


def test_params_command_reports_a_config_error_in_one_line(tmp_path):
    bad = tmp_path / "params.yaml"
    bad.write_text(PARAMS.read_text().replace("epochs: 10", "epochs: ten", 1))
    result = run_pipeline("params", "--params", bad)
    assert result.returncode == 2
    assert result.stderr.strip() == f'error: {bad}: train.reuters.epochs: expected a positive integer, got "ten"'


def test_params_rewrite_puts_a_hand_edited_file_back_in_dvcs_form(tmp_path):
    path = tmp_path / "params.yaml"
    # MNIST's one-epoch decay list, in flow style with a comment, as a hand edit would write it
    path.write_text(
        re.sub(
            r"    lr_decay_epochs:\n    - (\d+)\n",
            r"    lr_decay_epochs: [\1]  # a comment\n",
            PARAMS.read_text(),
            count=1,
        )
    )
    assert path.read_text() != PARAMS.read_text()
    result = run_pipeline("params", "--params", path, "--rewrite")
    assert result.returncode == 0 and "rewritten" in result.stdout
    assert path.read_text() == PARAMS.read_text()
    again = run_pipeline("params", "--params", path, "--rewrite")
    assert "already" in again.stdout


def test_params_lists_the_templates_keys_after_the_datasets_and_rewrite_keeps_them(tmp_path):
    path = write_params(tmp_path)
    text = run_pipeline("params", "--params", path).stdout
    assert (
        "\nadd.image_folders.train.epochs: " in text and "\nadd.labelled_texts.preprocess.text_column: text\n" in text
    )
    assert text.index("tune.mnist.study") < text.index("add.image_folders.download.files")
    assert "add." not in run_pipeline("params", "reuters", "--params", path).stdout
    before = path.read_text()
    assert "\nadd:\n  image_folders:\n" in before
    run_pipeline("params", "--params", path, "--rewrite")
    assert path.read_text() == before == format_params(yaml.safe_load(before))


def test_a_bad_template_is_one_error_line(tmp_path):
    """The templates are checked with the datasets (as `pipeline add` checks them): a file whose
    add.labelled_texts no new dataset could start from is refused."""
    path = write_params(tmp_path, {"add.labelled_texts.train.epochs": 0})
    done = run_pipeline("params", "--params", path, cwd=tmp_path)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"error: {path}: add.labelled_texts.train.epochs: expected a positive integer, got 0\n"
