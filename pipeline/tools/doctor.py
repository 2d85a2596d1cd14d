"""Pre-flight checks of a host or container: git and DVC in this folder, the tracking server,
disk, then GPUs, driver and library versions, shared memory and the strategy training would use.

Each check gives a status (pass, warn or fail), what it found, and the fix for a warn or a
fail. The checks that need TensorFlow run last and import it only then.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import urllib.parse
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

from pipeline.config.loading.loader import load_params, names
from pipeline.errors import PipelineError
from pipeline.tracking import probe, store
from pipeline.training import distribute

GIB = 1024**3
# The two datasets, their prepared arrays and models take about 0.5 GB per copy in the DVC
# cache; below this, a handful of experiments fill the disk mid-stage.
MIN_FREE_DISK = 5 * GIB
# NCCL's shared-memory transport between GPUs of one host; Docker's default /dev/shm is 64 MiB.
MIN_SHM = 1 * GIB
DOCKER_FLAGS = "--ipc=host --ulimit memlock=-1 (or --shm-size=1g)"


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # pass | warn | fail
    detail: str
    fix: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


def _run(args: list[str], cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:  # a folder we cannot enter, a hung tool
        return subprocess.CompletedProcess(args, 126, "", str(exc))


def check_git(folder: Path) -> Check:
    if shutil.which("git") is None:
        return Check("git", "fail", "git is not installed", "install git (DVC needs it)")
    out = _run(["git", "rev-parse", "--show-toplevel"], folder)
    if "dubious ownership" in out.stderr:
        return Check(
            "git",
            "fail",
            f"{folder} is owned by uid {folder.stat().st_uid}, git runs as uid "
            f"{os.getuid()} and refuses it (dubious ownership)",
            f'run as the owner (docker run --user "$(id -u):$(id -g)") or '
            f"git config --global --add safe.directory {folder}",
        )
    if out.returncode != 0:
        return Check("git", "fail", f"{folder} is not in a git repository", "run from your clone of the project")
    head = _run(["git", "rev-parse", "--short", "HEAD"], folder).stdout.strip() or "no commit yet"
    dirty = bool(_run(["git", "status", "--porcelain", "--untracked-files=no"], folder).stdout.strip())
    return Check("git", "pass", f"{out.stdout.strip()} at {head}{' (uncommitted changes)' if dirty else ''}")


def _dvc() -> list[str]:
    found = shutil.which("dvc")
    return [found] if found else [sys.executable, "-m", "dvc"]


def check_dvc(folder: Path) -> list[Check]:
    root = _run([*_dvc(), "root"], folder)
    if root.returncode != 0:
        reason = (root.stderr.strip().splitlines() or ["dvc failed"])[-1].removeprefix("ERROR: ")
        return [Check("dvc", "fail", reason, "run from your clone of the project (its .dvc/ folder)")]
    checks = [Check("dvc", "pass", f"DVC repository at {(folder / root.stdout.strip()).resolve()}")]
    configured = _run([*_dvc(), "config", "core.remote"], folder)
    default = configured.stdout.strip() if configured.returncode == 0 else ""
    if not default:
        checks.append(Check("dvc-remote", "pass", "no default remote (the cache is local)"))
        return checks
    urls = dict(
        line.split(None, 1)
        for line in _run([*_dvc(), "remote", "list"], folder).stdout.splitlines()
        if len(line.split(None, 1)) == 2
    )
    url = urls.get(default, "").strip()
    checks.append(_check_remote(default, url, folder))
    return checks


def _check_remote(name: str, url: str, folder: Path) -> Check:
    scheme = urllib.parse.urlsplit(url).scheme
    if scheme in ("", "file"):
        path = Path(urllib.parse.urlsplit(url).path if scheme else url)
        path = path if path.is_absolute() else (folder / ".dvc" / path).resolve()
        if path.is_dir() and os.access(path, os.W_OK):
            return Check("dvc-remote", "pass", f"{name}: {path} is writable")
        return Check(
            "dvc-remote",
            "fail",
            f"{name}: {path} is missing or not writable",
            "create it, mount it, or `dvc remote modify` its url",
        )
    if scheme in ("http", "https"):
        try:
            urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=10)
        except urllib.error.HTTPError:
            pass  # it answered: a listing may be refused, the server is there
        except OSError as exc:
            return Check(
                "dvc-remote",
                "fail",
                f"{name}: {url} does not answer ({getattr(exc, 'reason', exc)})",
                "check the network or `dvc remote modify` its url",
            )
        return Check("dvc-remote", "pass", f"{name}: {url} answers")
    return Check(
        "dvc-remote",
        "warn",
        f"{name}: {url} not checked (needs the {scheme} credentials)",
        "check it with `dvc status --cloud`",
    )


def check_writable(folder: Path) -> Check:
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".doctor-"):
            pass
    except OSError as exc:
        return Check(
            "folder",
            "fail",
            f"{folder} is not writable by uid {os.getuid()} ({exc.strerror})",
            "mount the clone read-write and run as its owner "
            '(docker run -v "$PWD":/workspace/project --user "$(id -u):$(id -g)")',
        )
    return Check("folder", "pass", f"{folder} is writable")


def check_disk(folder: Path) -> Check:
    cache = folder / ".dvc" / "cache"
    where = cache if cache.exists() else folder
    free = shutil.disk_usage(where).free
    if free < MIN_FREE_DISK:
        return Check(
            "disk",
            "warn",
            f"{free / GIB:.1f} GiB free for the DVC cache ({where})",
            f"free space or move the cache (`dvc cache dir PATH`); {MIN_FREE_DISK // GIB} GiB or more suits "
            "a few experiments",
        )
    return Check("disk", "pass", f"{free / GIB:.1f} GiB free for the DVC cache ({where})")


def check_tracking() -> Check:
    try:
        uri = store.tracking_uri()
        detail = probe.check_tracking(uri)
    except PipelineError as exc:
        what, _, fix = str(exc).partition("; ")
        return Check("tracking", "fail", what, fix)
    return Check("tracking", "pass", detail)


def check_artifacts(tracking_ok: bool, params_path: Path) -> Check:
    """The experiments of the datasets the params declare (every one, when they do not load)
    whose artifacts a `dvc exp run --queue`/`--temp` copy held, now deleted. Renamed, an
    experiment keeps its runs, and the next training creates the dataset's experiment again,
    right."""
    if not tracking_ok:
        return Check(
            "artifacts", "warn", "not checked: the tracking store failed its check", "fix the tracking store first"
        )
    try:
        declared: Optional[list[str]] = names(params_path)
    except PipelineError:
        declared = None  # the strategy check names the params' problem: every experiment is checked
    try:
        found = store.misplaced_artifacts(declared)
    except PipelineError as exc:
        return Check("artifacts", "warn", str(exc), "check the tracking store")
    if not found:
        whose = f"of {' or '.join(declared)} " if declared else ""
        return Check("artifacts", "pass", f"no experiment {whose}keeps its artifacts in a DVC temporary copy")
    listed = ", ".join(f"{name} (id {eid}): {location}" for eid, name, location in found)
    renames = " && ".join(
        f"mlflow experiments rename --experiment-id {eid} --new-name {name}-lost-artifacts" for eid, name, _ in found
    )
    return Check(
        "artifacts",
        "warn",
        f"artifacts of {listed} are inside {store.DVC_TEMP_FOLDER.strip('/')}, a copy DVC deletes "
        "after `dvc exp run --queue` or `--temp`: their runs' models and files are gone",
        f"{renames} (the runs stay; the next training creates the experiment again, with its "
        "artifacts in mlruns/ beside mlflow.db)",
    )


# --- checks that need TensorFlow ---------------------------------------------------------


def _nvidia_driver() -> Optional[str]:
    proc = Path("/proc/driver/nvidia/version")
    if proc.is_file():
        for word in proc.read_text().split():
            if word[:1].isdigit() and word.count(".") >= 1:
                return word
    if shutil.which("nvidia-smi"):
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.split()[0]
    return None


def _nccl_version() -> Optional[str]:
    if os.environ.get("NCCL_VERSION"):  # NVIDIA's containers set it
        return os.environ["NCCL_VERSION"]

    try:
        lib = ctypes.CDLL("libnccl.so.2")
    except OSError:
        return None
    code = ctypes.c_int()
    if lib.ncclGetVersion(ctypes.byref(code)) != 0:
        return None
    major, rest = divmod(code.value, 10000) if code.value >= 10000 else divmod(code.value, 1000)
    minor, patch = divmod(rest, 100) if code.value >= 10000 else divmod(rest, 100)
    return f"{major}.{minor}.{patch}"


def check_gpus(tf) -> tuple[Check, int]:
    gpus = tf.config.list_physical_devices("GPU")
    cuda = tf.test.is_built_with_cuda()
    if not gpus:
        requested = os.environ.get("NVIDIA_VISIBLE_DEVICES", "")
        if cuda and (_nvidia_driver() or requested not in ("", "void", "none")):
            # a driver, or a container given GPUs, and still none visible: something is off
            return Check(
                "gpus",
                "warn",
                "TensorFlow is built with CUDA but sees no GPU"
                + (f" (NVIDIA_VISIBLE_DEVICES={requested})" if requested else ""),
                "docker run --gpus all, with the NVIDIA driver and container toolkit on the host; "
                "check CUDA_VISIBLE_DEVICES",
            ), 0
        return Check("gpus", "pass", "none (no NVIDIA driver): training uses the CPU"), 0
    names = []
    for gpu in gpus:
        details = tf.config.experimental.get_device_details(gpu)
        names.append(f"{gpu.name.split(':', 1)[1]} {details.get('device_name', '?')}")
    return Check("gpus", "pass", f"{len(gpus)}: {', '.join(names)}"), len(gpus)


def check_versions(tf) -> Check:
    build = tf.sysconfig.get_build_info()
    parts = {
        "TensorFlow": tf.__version__,
        "driver": _nvidia_driver() or "none",
        "CUDA": build.get("cuda_version") or "none",
        "cuDNN": build.get("cudnn_version") or "none",
        "NCCL": _nccl_version() or "none",
    }
    return Check("versions", "pass", ", ".join(f"{k} {v}" for k, v in parts.items()))


def check_shared_memory(gpus: int) -> Check:
    shm = os.statvfs("/dev/shm")
    size = shm.f_frsize * shm.f_blocks
    soft, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    memlock = "unlimited" if soft == resource.RLIM_INFINITY else f"{soft / 1024**2:.0f} MiB"
    detail = f"/dev/shm {size / 1024**2:.0f} MiB, memlock {memlock}"
    if gpus >= 2 and (size < MIN_SHM or soft != resource.RLIM_INFINITY):
        return Check("shm", "warn", f"{detail}: too little for NCCL across {gpus} GPUs", f"docker run {DOCKER_FLAGS}")
    return Check("shm", "pass", detail + ("" if gpus >= 2 else " (matters with 2+ GPUs)"))


def check_strategy(params_path: Path, dataset: Optional[str]) -> Check:
    where = f"train.{dataset or '<its first dataset>'}"
    try:
        dataset = dataset or names(params_path)[0]
        where = f"train.{dataset}"
        cfg = load_params(params_path, dataset).train
        report = distribute.setup(cfg, where=where).facts
    except PipelineError as exc:
        return Check("strategy", "fail", str(exc), f"change {where} in {params_path} (see `pipeline devices`)")
    return Check(
        "strategy",
        "pass",
        f"{dataset}: {report['strategy']}, {report['replicas']} replica(s) on "
        f"{report['workers']} worker(s), all-reduce {report['cross_device_ops']}",
    )


def run_checks(params_path: Path, dataset: Optional[str], folder: Optional[Path] = None) -> list[Check]:
    """Every check, in order; TensorFlow is imported for the last four only."""
    folder = Path(folder or Path.cwd()).resolve()
    store = check_tracking()
    checks = [
        check_git(folder),
        *check_dvc(folder),
        check_writable(folder),
        check_disk(folder),
        store,
        check_artifacts(store.status == "pass", params_path),
    ]
    import tensorflow as tf

    gpu_check, gpus = check_gpus(tf)
    return [*checks, gpu_check, check_versions(tf), check_shared_memory(gpus), check_strategy(params_path, dataset)]


def format_line(check: Check) -> str:
    line = f"{check.status:<5} {check.name:<10} {check.detail}"
    return f"{line}; fix: {check.fix}" if check.fix and check.status != "pass" else line


def report(checks: list[Check], as_json: bool) -> str:
    """What `pipeline doctor` prints: a line per check, or the checks as JSON."""
    return json.dumps([c.as_dict() for c in checks], indent=2) if as_json else "\n".join(map(format_line, checks))
