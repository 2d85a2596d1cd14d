"""`pipeline download` (stages/download.py), as DVC runs it: the manifest it writes, one line for
what it cannot fetch, a progress bar only on a terminal. The fetch itself (mirrors, retries,
digests, archives) is tests/data/test_fetch.py's."""

from __future__ import annotations

import hashlib
import json
import sys

from support.datasets import flipped
from support.processes import run_on_terminal, run_pipeline, subprocess_env
from support.project import ROOT, write_params


def sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_download_stage_with_a_corrupt_archive_is_one_line(dataset_files, tmp_path):
    (tmp_path / "params.yaml").write_text((ROOT / "params.yaml").read_text())
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "mnist_png.tar.gz").write_bytes(flipped((dataset_files / "mnist_png.tar.gz").read_bytes()))
    env = subprocess_env(PIPELINE_DATA_MIRROR=mirror.as_uri())
    result = run_pipeline("download", "mnist", "--out", "raw", "--manifest", "raw.json", cwd=tmp_path, env=env)
    assert result.returncode == 1
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"error: {mirror.as_uri()}/mnist_png.tar.gz: truncated or corrupt archive: ")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mirror", "params.yaml"]


def test_download_stage_writes_a_manifest(file_server, dataset_files, tmp_path):
    (tmp_path / "params.yaml").write_text((ROOT / "params.yaml").read_text())
    env = subprocess_env(PIPELINE_DATA_MIRROR=file_server.url)
    result = run_pipeline("download", "mnist", "--out", "raw", "--manifest", "raw.json", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    manifest = json.loads((tmp_path / "raw.json").read_text())
    (entry,) = manifest["files"]
    digest = sha256(dataset_files / "mnist_png.tar.gz")
    assert entry == {
        "name": "mnist_png.tar.gz",
        "url": entry["url"],
        "sha256": digest,
        "bytes": (dataset_files / "mnist_png.tar.gz").stat().st_size,
        "verified": False,
    }
    assert entry["url"].startswith("https://")
    # where the bytes came from: the log line, and the sources file beside the folder
    assert f"from {file_server.url}/mnist_png.tar.gz" in result.stdout
    assert json.loads((tmp_path / "raw.sources.json").read_text()) == {
        "dataset": "mnist",
        "files": [
            {"name": "mnist_png.tar.gz", "sha256": digest, "fetched_from": f"{file_server.url}/mnist_png.tar.gz"}
        ],
    }
    # the archive's sha256 is not published; its images are pinned by the preprocess stage
    assert "(its images checked by preprocess.mnist.images_sha256)" in result.stdout
    assert "warning" not in result.stderr
    # pinned by nothing: said once, as a warning naming the key
    write_params(tmp_path, {"preprocess.mnist.images_sha256": None})
    result = run_pipeline("download", "mnist", "--out", "raw", "--manifest", "raw.json", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    assert "(not pinned)" in result.stdout
    assert [line for line in result.stderr.splitlines() if "warning" in line] == [
        "warning: download.mnist.files[0] (https://github.com/myleott/mnist_png/raw/400fe88faba05ae79bbc2107071144e6f1ea2720/"
        "mnist_png.tar.gz): no sha256 configured, so other bytes could be downloaded and trained on without a word; "
        "pin it or preprocess.mnist.images_sha256"
    ]


def test_download_stage_error_is_one_line(file_server, tmp_path):
    """A file neither the mirror nor its own URL holds: one line naming the URL, the mirror and
    the variable that set it; nothing written."""
    urls = [f"{file_server.url}/gone/{name}" for name in ("reuters.npz", "reuters_word_index.json")]
    write_params(tmp_path, {"download.reuters.files": [{"url": url, "sha256": None} for url in urls]})
    empty = (tmp_path / "empty").as_uri()
    env = subprocess_env(PIPELINE_DATA_MIRROR=empty)
    result = run_pipeline("download", "reuters", "--out", "raw", "--manifest", "raw.json", cwd=tmp_path, env=env)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"error: {urls[0]}: HTTP 404 Not Found; not in the mirror PIPELINE_DATA_MIRROR={empty} either"
    ]
    assert not (tmp_path / "raw").exists() and not (tmp_path / "raw.json").exists()


def test_progress_bar_only_on_a_terminal(file_server, tmp_path):
    (tmp_path / "params.yaml").write_text((ROOT / "params.yaml").read_text())
    env = subprocess_env(PIPELINE_DATA_MIRROR=file_server.url)
    args = [sys.executable, "-m", "pipeline", "download", "mnist", "--out", "raw", "--manifest", "m.json"]
    code, shown = run_on_terminal(args, tmp_path, env)
    assert code == 0
    assert "mnist_png.tar.gz:" in shown and "B/s" in shown
    piped = run_pipeline("download", "mnist", "--out", "raw2", "--manifest", "m2.json", cwd=tmp_path, env=env)
    assert piped.returncode == 0 and "B/s" not in piped.stderr
