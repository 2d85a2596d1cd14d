import hashlib
import json

import pytest
from support.datasets import flipped, make_reuters_npz
from support.processes import run_pipeline, subprocess_env
from support.project import ROOT, write_params
from support.servers import free_ports

from pipeline.config.keys.schema import DownloadConfig, RemoteFile
from pipeline.data.fetch import fetch_all, resolve_url
from pipeline.errors import DownloadError


def sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def spec(url, sha=None):
    return RemoteFile(url=url, sha256=sha)


SLEPT: list[float] = []  # the seconds fetch_all asked no_sleep for, since the last fetch()


def no_sleep(seconds):
    SLEPT.append(seconds)


def fetch(files, out, retries=2, mirror=""):
    SLEPT.clear()
    cfg = DownloadConfig(
        files=tuple(files), pretrained=(), mirror=mirror, retries=retries, backoff_seconds=0.5, timeout_seconds=5
    )
    return fetch_all(cfg, out, progress=False, sleep=no_sleep)


def test_resolve_url_uses_the_base_name_under_the_mirror():
    url = "https://example.org/a/b/reuters.npz?x=1"
    assert resolve_url(url, "") == url
    assert resolve_url(url, "file:///srv/data/") == "file:///srv/data/reuters.npz"


def test_http_download_verifies_and_reports(file_server, dataset_files, tmp_path):
    expected = sha256(dataset_files / "reuters.npz")
    out = tmp_path / "raw"
    results = fetch(
        [spec(f"{file_server.url}/reuters.npz", expected), spec(f"{file_server.url}/mnist_png.tar.gz")], out
    )
    assert sorted(p.name for p in out.iterdir()) == ["mnist_png.tar.gz", "reuters.npz"]
    assert (out / "reuters.npz").read_bytes() == (dataset_files / "reuters.npz").read_bytes()
    assert [r.verified for r in results] == [True, False]
    assert results[1].sha256 == sha256(dataset_files / "mnist_png.tar.gz")
    assert not (tmp_path / "raw.partial").exists()


def test_mirror_replaces_the_host(file_server, dataset_files, tmp_path):
    results = fetch([spec("https://unreachable.invalid/x/reuters.npz")], tmp_path / "raw", mirror=file_server.url)
    assert results[0].fetched_from == f"{file_server.url}/reuters.npz"
    assert results[0].url == "https://unreachable.invalid/x/reuters.npz"


def test_file_url(dataset_files, tmp_path):
    fetch([spec((dataset_files / "reuters.npz").as_uri())], tmp_path / "raw")
    assert (tmp_path / "raw" / "reuters.npz").is_file()


def test_dropped_connection_is_resumed_with_a_range_request(file_server, dataset_files, tmp_path):
    file_server.faults["mnist_png.tar.gz"] = [("drop", 5000)]
    fetch([spec(f"{file_server.url}/mnist_png.tar.gz", sha256(dataset_files / "mnist_png.tar.gz"))], tmp_path / "raw")
    assert file_server.requests == [("mnist_png.tar.gz", None), ("mnist_png.tar.gz", "bytes=5000-")]
    assert sha256(tmp_path / "raw" / "mnist_png.tar.gz") == sha256(dataset_files / "mnist_png.tar.gz")


def test_server_errors_are_retried_with_backoff(file_server, tmp_path):
    file_server.faults["reuters.npz"] = [("status", 503), ("status", 500)]
    fetch([spec(f"{file_server.url}/reuters.npz")], tmp_path / "raw", retries=3)
    assert len(file_server.requests) == 3
    assert SLEPT == [0.5, 1.0]


def test_not_found_is_not_retried_and_leaves_nothing(file_server, tmp_path):
    with pytest.raises(DownloadError, match=r"/missing.npz: HTTP 404"):
        fetch([spec(f"{file_server.url}/missing.npz")], tmp_path / "raw")
    assert len(file_server.requests) == 1
    assert not (tmp_path / "raw").exists()


def test_unreachable_url_gives_up_after_retries(tmp_path):
    url = f"http://127.0.0.1:{free_ports(1)[0]}/reuters.npz"
    with pytest.raises(DownloadError) as info:
        fetch([spec(url)], tmp_path / "raw", retries=2)
    assert str(info.value).startswith(f"{url}: cannot connect:")
    assert "gave up after 3 attempts" in str(info.value)
    assert not (tmp_path / "raw").exists()


def test_checksum_mismatch_leaves_nothing(file_server, tmp_path):
    with pytest.raises(DownloadError, match="sha256 mismatch: expected 0{64}, got [0-9a-f]{64}"):
        fetch([spec(f"{file_server.url}/reuters.npz", "0" * 64)], tmp_path / "raw")
    assert list(tmp_path.iterdir()) == []  # no output, no staging folder


def test_an_earlier_output_survives_a_failed_download(file_server, tmp_path):
    out = tmp_path / "raw"
    fetch([spec(f"{file_server.url}/reuters.npz")], out)
    with pytest.raises(DownloadError):
        fetch([spec(f"{file_server.url}/reuters.npz", "0" * 64)], out)
    assert (out / "reuters.npz").is_file()


@pytest.mark.parametrize("name", ["mnist_png.tar.gz", "reuters.npz"])
def test_truncated_archive_is_rejected(dataset_files, tmp_path, name):
    data = (dataset_files / name).read_bytes()
    bad = tmp_path / "src" / name
    bad.parent.mkdir()
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(DownloadError, match=f"{name}: truncated or corrupt archive"):
        fetch([spec(bad.as_uri())], tmp_path / "raw")
    assert not (tmp_path / "raw").exists()


@pytest.mark.parametrize("name", ["mnist_png.tar.gz", "mnist.zip", "reuters.npz"])
def test_corrupt_compressed_data_is_rejected(tmp_path, name):
    from support.datasets import make_mnist_archive

    good = tmp_path / "good" / name
    good.parent.mkdir()
    if name == "reuters.npz":
        make_reuters_npz(good)
    else:
        make_mnist_archive(good, per_class=(3, 1))
    bad = tmp_path / "src" / name
    bad.parent.mkdir()
    bad.write_bytes(flipped(good.read_bytes()))
    with pytest.raises(DownloadError, match=rf"^{bad.as_uri()}: truncated or corrupt archive: \S") as caught:
        fetch([spec(bad.as_uri())], tmp_path / "raw")
    assert "\n" not in str(caught.value)
    assert not (tmp_path / "raw").exists()


def test_pretrained_weights_are_fetched_like_the_files_into_their_own_folder(file_server, dataset_files, tmp_path):
    """download.<ds>.pretrained: looked up in the mirror, verified, recorded in the manifest and
    the sources file; the folder lists its files in weights.json, none when there are none (a
    DVC out all the same, and never an empty one)."""
    (tmp_path / "params.yaml").write_text((ROOT / "params.yaml").read_text())
    env = subprocess_env(PIPELINE_DATA_MIRROR=file_server.url)
    args = ("download", "mnist", "--out", "raw", "--manifest", "raw.json", "--pretrained", "weights")
    result = run_pipeline(*args, cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    assert [p.name for p in (tmp_path / "weights").iterdir()] == ["weights.json"]
    assert json.loads((tmp_path / "weights" / "weights.json").read_text()) == {"dataset": "mnist", "files": []}
    assert json.loads((tmp_path / "raw.json").read_text())["pretrained"] == []
    weights = dataset_files / "reuters_word_index.json"  # any file stands for the weights here
    pinned = {"url": "https://storage.example.invalid/models/reuters_word_index.json", "sha256": sha256(weights)}
    write_params(tmp_path, {"download.mnist.pretrained": [pinned]})
    result = run_pipeline(*args, cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "weights" / "reuters_word_index.json").read_bytes() == weights.read_bytes()
    assert json.loads((tmp_path / "weights" / "weights.json").read_text())["files"] == ["reuters_word_index.json"]
    (entry,) = json.loads((tmp_path / "raw.json").read_text())["pretrained"]
    assert (entry["url"], entry["sha256"], entry["verified"]) == (pinned["url"], pinned["sha256"], True)
    sources = json.loads((tmp_path / "raw.sources.json").read_text())["files"]
    assert sources[-1]["fetched_from"] == f"{file_server.url}/reuters_word_index.json"
    assert f"reuters_word_index.json: {weights.stat().st_size} bytes, sha256 {pinned['sha256']} (verified)" in (
        result.stdout
    )
    # another file under the pinned name: refused, and the folder from before stays
    write_params(tmp_path, {"download.mnist.pretrained": [{**pinned, "sha256": "0" * 64}]})
    result = run_pipeline(*args, cwd=tmp_path, env=env)
    assert result.returncode == 1 and result.stderr.count("\n") == 1 and "sha256 mismatch" in result.stderr
    assert (tmp_path / "weights" / "reuters_word_index.json").exists()
    # unpinned: fetched, and said as a warning naming the key
    write_params(tmp_path, {"download.mnist.pretrained": [{**pinned, "sha256": None}]})
    result = run_pipeline(*args, cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    assert f"reuters_word_index.json: {weights.stat().st_size} bytes, sha256 {pinned['sha256']} (not pinned)" in (
        result.stdout
    )
    assert (
        "warning: download.mnist.pretrained[0] (https://storage.example.invalid/models/reuters_word_index.json): "
        "no sha256 configured, so other weights could be trained from without a word"
    ) in result.stderr


def test_the_manifest_is_the_same_whichever_mirror_served_the_bytes(file_server, dataset_files, tmp_path):
    """The manifest is a DVC out (dvc.lock records its md5): a clone whose mirror lies elsewhere
    must get the same bytes, or its dvc.lock differs and the stages after rerun for nothing."""
    mirrors = [file_server.url]
    for where in ("one", "elsewhere/two"):
        mirror = tmp_path / where / "mirror"
        mirror.mkdir(parents=True)
        for name in ("reuters.npz", "reuters_word_index.json", "mnist_png.tar.gz"):
            (mirror / name).write_bytes((dataset_files / name).read_bytes())
        mirrors.append(mirror.as_uri())
    manifests, sources = [], []
    for i, mirror in enumerate(mirrors):
        clone = tmp_path / f"clone{i}"
        clone.mkdir()
        files = [
            {"url": f"https://example.org/{name}", "sha256": None}
            for name in ("reuters.npz", "reuters_word_index.json")
        ]
        write_params(clone, {"download.reuters.files": files})  # the test's bytes, not the published ones
        env = subprocess_env(PIPELINE_DATA_MIRROR=mirror)
        for dataset in ("mnist", "reuters"):
            args = ["--out", f"data/raw/{dataset}", "--manifest", f"data/raw/{dataset}.manifest.json"]
            result = run_pipeline("download", dataset, *args, cwd=clone, env=env)
            assert result.returncode == 0, result.stderr
        raw = clone / "data" / "raw"
        manifests.append([(raw / f"{d}.manifest.json").read_bytes() for d in ("mnist", "reuters")])
        sources.append(json.loads((raw / "mnist.sources.json").read_text())["files"][0]["fetched_from"])
    assert manifests[0] == manifests[1] == manifests[2]
    assert mirrors[0].encode() not in manifests[0][0] and b"file://" not in manifests[0][0]
    assert sources == [f"{m}/mnist_png.tar.gz" for m in mirrors]


def test_a_file_the_mirror_lacks_comes_from_its_url(file_server, dataset_files, tmp_path):
    """A mirror is the first place to look: what it lacks (no such file; HTTP 404) comes from
    the file's own URL, and the result says where each file came from; the manifest's lines
    are the same as with no mirror."""
    (tmp_path / "mirror").mkdir()
    (tmp_path / "mirror" / "reuters.npz").write_bytes((dataset_files / "reuters.npz").read_bytes())
    mirror = (tmp_path / "mirror").as_uri()
    files = [spec(f"{file_server.url}/{name}") for name in ("reuters.npz", "mnist_png.tar.gz")]
    results = fetch(files, tmp_path / "raw", mirror=mirror)
    assert [r.fetched_from for r in results] == [f"{mirror}/reuters.npz", f"{file_server.url}/mnist_png.tar.gz"]
    assert file_server.requests == [("mnist_png.tar.gz", None)]
    plain = fetch(files, tmp_path / "plain")
    assert [r.described() for r in results] == [r.described() for r in plain]
    # an http mirror that answers 404
    file_server.requests.clear()
    (result,) = fetch(files[1:], tmp_path / "raw2", mirror=f"{file_server.url}/nothing")
    assert result.fetched_from == files[1].url
    assert file_server.requests == [("nothing/mnist_png.tar.gz", None), ("mnist_png.tar.gz", None)]


def test_a_file_url_is_read_from_its_path_whatever_the_mirror(file_server, dataset_files, tmp_path):
    url = (dataset_files / "reuters.npz").as_uri()
    (result,) = fetch([spec(url)], tmp_path / "raw", mirror=file_server.url)
    assert result.fetched_from == url and file_server.requests == []


def test_a_mirror_holding_another_file_is_an_error_naming_it(file_server, dataset_files, tmp_path):
    """A mirror that holds the file but answers wrong (another sha256; a server error to the
    last retry) is an error naming the mirror and the URL: the URL is not asked."""
    (tmp_path / "mirror").mkdir()
    (tmp_path / "mirror" / "reuters.npz").write_bytes(b"not the file")
    mirror = (tmp_path / "mirror").as_uri()
    url = f"{file_server.url}/reuters.npz"
    expected = sha256(dataset_files / "reuters.npz")
    with pytest.raises(DownloadError) as caught:
        fetch([spec(url, expected)], tmp_path / "raw", mirror=mirror)
    assert str(caught.value).startswith(f"{mirror}/reuters.npz: sha256 mismatch: expected {expected}, got ")
    assert str(caught.value).endswith(f" (from the mirror download.mirror={mirror}, for {url})")
    file_server.faults["m/reuters.npz"] = [("status", 503)] * 2
    with pytest.raises(DownloadError, match=r"HTTP 503 .*\(gave up after 2 attempts\) \(from the mirror download"):
        fetch([spec(url)], tmp_path / "raw", retries=1, mirror=f"{file_server.url}/m")
    assert file_server.requests == [("m/reuters.npz", None)] * 2
    assert not (tmp_path / "raw").exists()


def test_a_file_url_naming_a_folder_copies_it_whole_with_its_digest(tmp_path):
    folder = tmp_path / "shapes"
    (folder / "train" / "circle").mkdir(parents=True)
    (folder / "train" / "circle" / "a.png").write_bytes(b"one")
    (folder / "test").mkdir()
    (folder / "test" / "b.png").write_bytes(b"two")
    lines = "".join(
        f"{p} {hashlib.sha256(d).hexdigest()}\n" for p, d in (("test/b.png", b"two"), ("train/circle/a.png", b"one"))
    )
    expected = hashlib.sha256(lines.encode()).hexdigest()
    (result,) = fetch([spec(folder.as_uri(), expected)], tmp_path / "raw")
    assert (result.name, result.sha256, result.bytes, result.verified) == ("shapes", expected, 6, True)
    assert (tmp_path / "raw" / "shapes" / "train" / "circle" / "a.png").read_bytes() == b"one"
    with pytest.raises(DownloadError, match=f"{folder.as_uri()}: sha256 mismatch: expected 0{{64}}, got {expected}"):
        fetch([spec(folder.as_uri(), "0" * 64)], tmp_path / "again")
    assert not (tmp_path / "again").exists() and not (tmp_path / "again.partial").exists()
    (tmp_path / "empty").mkdir()
    with pytest.raises(DownloadError, match="empty: an empty folder"):
        fetch([spec((tmp_path / "empty").as_uri())], tmp_path / "none")


def test_the_pretrained_weights_of_a_dataset_sit_beside_its_prepared_folder():
    from pipeline.data.fetch import pretrained_beside

    assert pretrained_beside("data/prepared/flowers").as_posix() == "data/pretrained/flowers"
