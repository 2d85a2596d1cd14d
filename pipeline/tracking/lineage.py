"""Where a run came from: the command or DVC stage, the git commit and whether code differs
from it, the md5 that dvc.lock records for its inputs, the host and framework, and the
prepared data it read as MLflow dataset inputs."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import re
import socket
import subprocess
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import yaml

from pipeline.data import fetch
from pipeline.runtime import environment
from pipeline.tracking import store

if TYPE_CHECKING:  # a type alone: the data wing's description
    from pipeline.data.prepared import Prepared


def source_tags(stage: str, dataset: str) -> dict[str, str]:
    """Where a run came from, as the runs table's Source column shows it: the DVC stage that
    ran (`train@reuters`), or outside DVC the command (`pipeline train reuters`). MLflow's own
    default is the script's file name, `__main__.py` for `python -m pipeline`."""
    return {
        "mlflow.source.name": os.environ.get("DVC_STAGE") or f"pipeline {stage} {dataset}",
        "mlflow.source.type": "LOCAL",
    }


MAX_TAG = 5000  # characters of a tag value shown (MLflow's limit is 8,000)


def _git(args: list[str], cwd: Path) -> Optional[str]:
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


# What a repro writes, params.yaml (the run's params show it) and the documentation: a change
# to these does not make a run's code differ from its commit.
NOT_CODE = (
    ":(exclude)dvc.lock",
    ":(exclude,glob)**/.gitignore",
    ":(exclude)reports",
    ":(exclude)params.yaml",
    ":(exclude,glob)**/*.md",
    ":(exclude)docs",
)


def git_state(root: Optional[Path] = None) -> tuple[Optional[str], list[str]]:
    """HEAD's commit (None outside git) and the tracked files whose content differs from it,
    apart from NOT_CODE."""
    root = Path(root or Path.cwd())
    commit = _git(["rev-parse", "HEAD"], root)
    if not commit:
        return None, []
    changed = _git(["diff", "--name-only", "HEAD", "--", ".", *NOT_CODE], root) or ""
    return commit, changed.splitlines()


def commit_suffix(root: Optional[Path] = None) -> str:
    """`-<short commit>`, and `-dirty` when code differs from it, for a run's name."""
    commit, changed = git_state(root)
    return f"-{commit[:7]}{'-dirty' if changed else ''}" if commit else ""


def lineage_tags(inputs: Iterable[Path | str], root: Optional[Path] = None) -> dict[str, str]:
    """Git commit, whether code differs from it (and which files), dvc.lock hashes of
    `inputs`, DVC experiment, host, versions."""
    root = Path(root or Path.cwd())
    tags: dict[str, str] = {"host": socket.gethostname(), "python.version": platform.python_version()}
    commit, changed = git_state(root)
    if commit:
        # Dirty: tracked code differs from the commit. A `dvc exp run -S` edits params.yaml,
        # which the params show; a repro writes dvc.lock, reports/ and .gitignore files.
        tags.update({"git.commit": commit, "git.dirty": str(bool(changed)).lower(), "mlflow.source.git.commit": commit})
        if changed:
            tags["git.changed_files"] = ", ".join(changed)[:MAX_TAG]
    tags.update(_dvc_hashes(inputs, root))
    for env, tag in (
        ("DVC_EXP_NAME", "dvc.exp_name"),
        ("DVC_EXP_BASELINE_REV", "dvc.exp_baseline_rev"),
        ("DVC_STAGE", "dvc.stage"),
        ("NVIDIA_TENSORFLOW_VERSION", "container.nvidia_tensorflow"),
        ("PIPELINE_IMAGE", "container.image"),
    ):
        if os.environ.get(env):
            tags[tag] = os.environ[env]
    return tags


# Where dvc.yaml's download stage writes a dataset: data/raw/<dataset>/, its manifest
# data/raw/<dataset>.manifest.json, and (untracked) data/raw/<dataset>.sources.json.
RAW = Path("data", "raw")


def fetch_tags(dataset: str, root: Optional[Path] = None) -> dict[str, str]:
    """Where the download stage fetched each file of `dataset` from on this host (its sources
    file, beside the download folder), as tags `data.source.<file name>`: the manifest, a DVC
    out, holds the data alone so that dvc.lock is the same on every host. Nothing when the
    download did not run here (DVC restored it from its cache, `dvc pull`, a queued experiment's
    copy), or when the sources file is another download's than the manifest's."""
    root = Path(root or Path.cwd())
    sources = _read_json(fetch.sources_path(root / RAW / dataset))
    manifest = _read_json(root / RAW / f"{dataset}.manifest.json")
    try:
        recorded = {f["name"]: f["sha256"] for f in manifest["files"]}
        fetched = {f["name"]: (f["sha256"], f["fetched_from"]) for f in sources["files"]}
    except (KeyError, TypeError):
        return {}
    if {name: sha for name, (sha, _) in fetched.items()} != recorded:
        return {}  # not the bytes the manifest describes
    return {f"data.source.{_tag_key(name)}": str(where)[:MAX_TAG] for name, (_, where) in fetched.items()}


def _read_json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _tag_key(name: str) -> str:
    # MLflow's tag keys: alphanumerics, '_', '-', '.', ' ' ('/' and ':' too, not on Windows for ':')
    return re.sub(r"[^\w.\- ]", "_", name)


def dvc_experiment() -> str:
    """The DVC experiment this process runs in (`dvc exp run` names it), or ""."""
    return os.environ.get("DVC_EXP_NAME", "")


def _dvc_hashes(inputs: Iterable[Path | str], root: Path) -> dict[str, str]:
    """The md5 that dvc.lock records for each input path (as an out of the stage that made it)."""
    lock = root / "dvc.lock"
    if not lock.is_file():
        return {}
    try:
        stages = (yaml.safe_load(lock.read_text()) or {}).get("stages", {})
    except yaml.YAMLError:
        return {}
    recorded = {}
    for stage in stages.values():
        for out in stage.get("outs", []) or []:
            recorded[os.path.normpath(out["path"])] = out.get("md5") or out.get("hash") or ""
    tags = {}
    for path in inputs:
        rel = os.path.normpath(os.path.relpath((root / path).resolve(), root.resolve()))
        if rel in recorded and recorded[rel]:
            tags[f"dvc.data.{rel}"] = recorded[rel]
    return tags


def framework_tags() -> dict[str, str]:
    """TensorFlow, Keras, CUDA and cuDNN versions (CUDA/cuDNN 'none' on a CPU build), and the
    Python environment's (`pipeline.runtime.environment.describe`: the lock's or the container's)."""
    import keras
    import tensorflow as tf

    build = tf.sysconfig.get_build_info()
    return {
        "tensorflow.version": tf.__version__,
        "keras.version": keras.__version__,
        "cuda.version": str(build.get("cuda_version") or "none"),
        "cudnn.version": str(build.get("cudnn_version") or "none"),
        **environment.describe(),
    }


def log_inputs(dataset: str, prepared: Prepared, splits, root: Optional[Path] = None) -> None:
    """The prepared data a run read (`splits` of the description `prepared`, of its folder), as MLflow
    dataset inputs: named `<dataset>-<split>`, sourced at the DVC path, with the md5 dvc.lock
    records for it as digest, and the samples' schema (the shards are not read again)."""
    root = Path(root or Path.cwd())
    rel = os.path.normpath(os.path.relpath(prepared.folder.resolve(), root.resolve()))
    digest = _dvc_hashes([prepared.folder], root).get(f"dvc.data.{rel}", "")[:32] or None
    contexts = {"train": "training", "val": "validation", "test": "testing"}
    # MLflow looks a dataset up, then inserts it: two runs logging the same data at once into
    # one sqlite store both insert, and one fails (UNIQUE constraint): take turns.
    path = store.sqlite_path(store.tracking_uri())
    with store.store_lock(path) if path is not None else contextlib.nullcontext():
        _log_splits(dataset, prepared, splits, rel, digest, contexts)


def _log_splits(dataset: str, prepared: Prepared, splits, rel: str, digest, contexts: dict) -> None:
    import mlflow
    import numpy as np
    from mlflow.data.dataset_source_registry import resolve_dataset_source
    from mlflow.data.meta_dataset import MetaDataset
    from mlflow.types.schema import Schema, TensorSpec

    x, y = prepared.head(splits[0], 0)
    schema = Schema(
        [
            TensorSpec(np.dtype(x.dtype), (-1, *prepared.shape), "features"),
            TensorSpec(np.dtype(y.dtype), (-1,), "targets"),
        ]
    )
    for split in splits:
        with warnings.catch_warnings():
            # a relative path matches two of MLflow's local source types; both read it alike
            warnings.filterwarnings("ignore", message="The specified dataset source can be interpreted")
            source = resolve_dataset_source(rel)
        ds = MetaDataset(  # type: ignore[abstract]  # its stub says profile is abstract; it is defined
            source, name=f"{dataset}-{split}", digest=digest or prepared.shards_digest(split), schema=schema
        )
        mlflow.log_input(ds, context=contexts.get(split, split))
