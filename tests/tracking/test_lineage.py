"""pipeline/tracking/lineage.py: what a run records of where it came from."""

import subprocess

import yaml

from pipeline.tracking import lineage


def git(*args, cwd):
    subprocess.run(
        ["git", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        env={
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@e",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@e",
            "PATH": "/usr/bin:/bin",
        },
    )


def test_lineage_tags(tmp_path, monkeypatch):
    git("init", "-q", cwd=tmp_path)
    (tmp_path / "params.yaml").write_text("a: 1\n")
    (tmp_path / "dvc.lock").write_text(
        yaml.safe_dump(
            {"schema": "2.0", "stages": {"preprocess@x": {"outs": [{"path": "data/prepared/x", "md5": "abc.dir"}]}}}
        )
    )
    git("add", "-A", cwd=tmp_path)
    git("commit", "-qm", "c", cwd=tmp_path)
    (tmp_path / "data" / "prepared" / "x").mkdir(parents=True)
    monkeypatch.setenv("DVC_EXP_NAME", "bold-cat")
    (tmp_path / "dvc.lock").write_text("schema: '2.0'\nstages: {}\n")  # DVC rewrites it mid-repro
    tags = lineage.lineage_tags([tmp_path / "data" / "prepared" / "x"], root=tmp_path)
    assert tags["git.dirty"] == "false"
    assert len(tags["git.commit"]) == 40 and tags["mlflow.source.git.commit"] == tags["git.commit"]
    assert tags["dvc.exp_name"] == "bold-cat"
    (tmp_path / "dvc.lock").write_text(
        yaml.safe_dump({"stages": {"preprocess@x": {"outs": [{"path": "data/prepared/x", "md5": "abc.dir"}]}}})
    )
    (tmp_path / "params.yaml").write_text("a: 2\n")  # as `dvc exp run -S` does: params, not code
    (tmp_path / "docs").mkdir()
    for doc in ("README.md", "docs/notes.md", "docs/figure.png"):  # documentation, not code
        (tmp_path / doc).write_text("words\n")
        git("add", doc, cwd=tmp_path)
    tags = lineage.lineage_tags(["data/prepared/x"], root=tmp_path)
    assert tags["git.dirty"] == "false" and "git.changed_files" not in tags
    assert tags["dvc.data.data/prepared/x"] == "abc.dir"
    assert lineage.commit_suffix(tmp_path) == "-" + tags["git.commit"][:7]
    (tmp_path / "code.py").write_text("x = 1\n")
    git("add", "code.py", cwd=tmp_path)  # staged but not committed: code that differs
    tags = lineage.lineage_tags([], root=tmp_path)
    assert tags["git.dirty"] == "true" and tags["git.changed_files"] == "code.py"
    assert lineage.commit_suffix(tmp_path).endswith("-dirty")


def test_a_runs_source_is_its_dvc_stage_or_the_command(monkeypatch):
    monkeypatch.delenv("DVC_STAGE", raising=False)
    assert lineage.source_tags("train", "reuters") == {
        "mlflow.source.name": "pipeline train reuters",
        "mlflow.source.type": "LOCAL",
    }
    monkeypatch.setenv("DVC_STAGE", "train@reuters")
    assert lineage.source_tags("evaluate", "mnist")["mlflow.source.name"] == "train@reuters"


def downloaded(root, dataset, files, sources=None):
    """What the download stage leaves in data/raw: the manifest (the data alone) and, beside the
    folder, where each file came from on this host."""
    from pipeline.data.fetch import FetchResult, sources_path
    from pipeline.io import write_json

    results = [FetchResult(name, f"https://example.org/{name}", where, sha, 3, False) for name, where, sha in files]
    raw = root / "data" / "raw"
    write_json(raw / f"{dataset}.manifest.json", {"dataset": dataset, "files": [r.described() for r in results]})
    shown = [FetchResult(*r) for r in sources] if sources else results
    write_json(sources_path(raw / dataset), {"dataset": dataset, "files": [r.source() for r in shown]})


def test_a_runs_data_source_is_where_this_hosts_download_fetched_each_file(tmp_path):
    assert lineage.fetch_tags("shapes", tmp_path) == {}  # not downloaded here
    files = [("a.npz", "file:///srv/mirror/a.npz", "1" * 64), ("b@2+x.json", "http://127.0.0.1:8/b@2+x.json", "2" * 64)]
    downloaded(tmp_path, "shapes", files)
    assert lineage.fetch_tags("shapes", tmp_path) == {
        "data.source.a.npz": "file:///srv/mirror/a.npz",
        "data.source.b_2_x.json": "http://127.0.0.1:8/b@2+x.json",  # a key MLflow takes
    }
    assert "fetched_from" not in (tmp_path / "data" / "raw" / "shapes.manifest.json").read_text()
    # another download's sources (other bytes than the manifest's): not this data's
    other = [(name, "a.npz", where, "3" * 64, 3, False) for name, where, _ in files]
    downloaded(tmp_path, "shapes", files, sources=other)
    assert lineage.fetch_tags("shapes", tmp_path) == {}
