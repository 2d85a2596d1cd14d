"""Small datasets in the real formats, and an HTTP server to serve them from 127.0.0.1; a
short Reuters training's params and its prepared folder; the download params of served files.

The server speaks enough HTTP for the real download code: Content-Length, Range requests
(206), and faults on demand (a dropped connection after N bytes, a 500) to test resume and
retries.
"""

from __future__ import annotations

import io
import json
import tarfile
import threading
import time
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
from support.processes import run_pipeline
from support.project import ROOT, write_params

REUTERS_CLASSES = 46


def make_reuters_npz(path: Path, n: int = 240, seed: int = 0, vocab: int = 600) -> Path:
    """A reuters.npz like Keras': `x` an object array of word-index lists, `y` int64 labels.

    Each class favours its own band of words, so a model can learn something.
    """
    rng = np.random.RandomState(seed)
    labels = np.concatenate([np.arange(REUTERS_CLASSES), rng.randint(0, 6, n - REUTERS_CLASSES)])
    rng.shuffle(labels)
    xs = []
    for label in labels:
        length = int(rng.choice([rng.randint(5, 60), rng.randint(300, 420)], p=[0.8, 0.2]))
        common = rng.randint(1, 40, length)
        topical = 50 + label * 10 + rng.randint(0, 10, length)
        words = np.where(rng.rand(length) < 0.5, topical, common)
        words[rng.rand(length) < 0.02] = vocab - 1 - rng.randint(0, 5)
        xs.append(list(int(w) for w in words))
    x = np.empty(len(xs), dtype=object)
    x[:] = xs
    np.savez(path, x=x, y=labels.astype(np.int64))
    return path


def make_word_index(path: Path, vocab: int = 600) -> Path:
    path.write_text(json.dumps({f"word{i}": i for i in range(1, vocab)}))
    return path


def make_reuters_raw(folder: Path, n: int = 240) -> Path:
    """A download folder of Reuters as the download stage leaves it: reuters.npz and the word index."""
    folder.mkdir(parents=True, exist_ok=True)
    make_reuters_npz(folder / "reuters.npz", n=n)
    make_word_index(folder / "reuters_word_index.json")
    return folder


def digit_image(label: int, rng: np.random.RandomState, size: int = 28) -> np.ndarray:
    """A learnable stand-in for a digit: a bright bar whose place depends on the class."""
    img = rng.randint(0, 40, (size, size)).astype(np.uint8)
    row = 2 + (label % 5) * 5
    col = 2 if label < 5 else size // 2
    img[row : row + 4, col : col + 10] = 220 + rng.randint(0, 30)
    return img


def encode(img: np.ndarray, fmt: str = "png", mode: str = "L") -> bytes:
    from PIL import Image

    pil = Image.fromarray(img, "L")
    if mode != "L":
        pil = pil.convert(mode)
    buf = io.BytesIO()
    pil.save(buf, format="JPEG" if fmt in ("jpg", "jpeg") else "PNG")
    return buf.getvalue()


def make_mnist_archive(
    path: Path,
    *,
    per_class: tuple[int, int] = (6, 2),
    splits: tuple[str, str] = ("training", "testing"),
    top: str = "mnist_png",
    ext: str = "png",
    seed: int = 0,
    extra: dict[str, bytes] | None = None,
    mode: str = "L",
) -> Path:
    """An MNIST-style archive (.zip or .tar.gz by `path`'s name) of <split>/<digit>/<n>.<ext>."""
    rng = np.random.RandomState(seed)
    members: dict[str, bytes] = {}
    for split, count in zip(splits, per_class):
        for label in range(10):
            for i in range(count):
                name = f"{top}/{split}/{label}/{label * 1000 + i}.{ext}".lstrip("/")
                members[name] = encode(digit_image(label, rng), ext, mode)
    members.update(extra or {})
    write_archive(path, members)
    return path


def write_archive(path: Path, members: dict[str, bytes]) -> None:
    if path.name.endswith(".zip"):
        with zipfile.ZipFile(path, "w") as zf:
            for name, data in members.items():
                zf.writestr(name, data)
    else:
        with tarfile.open(path, "w:gz") as tf:
            for name, data in members.items():
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))


class FileServer:
    """Serve a folder over HTTP on 127.0.0.1 with Range support and injectable faults.

    `faults[name]` is a list consumed one per request: ("drop", n) sends the headers of the
    full file and then only n bytes; ("status", code) answers with that status. `chunk_delay`
    seconds between 8 KiB chunks make a slow link (a transfer that can be caught midway).
    """

    def __init__(self, root: Path, chunk_delay: float = 0.0):
        self.root = Path(root)
        self.chunk_delay = chunk_delay
        self.faults: dict[str, list] = {}
        self.requests: list[tuple[str, str | None]] = []  # (path, Range header)
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                name = self.path.lstrip("/")
                server.requests.append((name, self.headers.get("Range")))
                fault = server.faults.get(name, [None]).pop(0) if server.faults.get(name) else None
                if fault and fault[0] == "status":
                    self.send_error(fault[1])
                    return
                file = server.root / name
                if not file.is_file():
                    self.send_error(404)
                    return
                data = file.read_bytes()
                start = 0
                ranged = self.headers.get("Range")
                if ranged and ranged.startswith("bytes="):
                    start = int(ranged[6:].split("-")[0])
                    if start >= len(data):
                        self.send_error(416)
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                else:
                    self.send_response(200)
                body = data[start:]
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if fault and fault[0] == "drop":
                    self.wfile.write(body[: fault[1]])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                if not server.chunk_delay:
                    self.wfile.write(body)
                    return
                for at in range(0, len(body), 8192):
                    self.wfile.write(body[at : at + 8192])
                    self.wfile.flush()
                    time.sleep(server.chunk_delay)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


# a short custom-loop Reuters training on fixture data: what the multi-worker tests train
SHORT_CUSTOM_REUTERS = {
    "preprocess.reuters.max_len": 60,
    "train.reuters.loop": "custom",
    "train.reuters.epochs": 2,
    "train.reuters.batch_size_per_replica": 8,
}


def prepared_reuters(folder: Path, out: str = "prepared", n: int = 240, **overrides) -> Path:
    """Fixture Reuters (`n` newswires) in folder/raw, params.yaml for SHORT_CUSTOM_REUTERS and
    `overrides` (param keys with `.` written `__`), and the preprocess stage's folder/`out`."""
    make_reuters_raw(folder / "raw", n=n)
    write_params(folder, {**SHORT_CUSTOM_REUTERS, **{k.replace("__", "."): v for k, v in overrides.items()}})
    done = run_pipeline("preprocess", "reuters", "--raw", "raw", "--out", out, cwd=folder)
    assert done.returncode == 0, done.stderr
    return folder


def reuters_files_of(served: Path) -> list:
    """params' download.reuters.files with the sha256 of the fixtures in `served`, so that the
    real check runs on them."""
    import hashlib

    from pipeline.config.loading.loader import read_yaml

    files = read_yaml(ROOT / "params.yaml")["download"]["reuters"]["files"]
    for entry in files:
        entry["sha256"] = hashlib.sha256((Path(served) / Path(entry["url"]).name).read_bytes()).hexdigest()
    return files


def flipped(data: bytes) -> bytes:
    """`data` with 64 bytes flipped a third of the way in: inside the compressed stream."""
    out = bytearray(data)
    for i in range(len(out) // 3, len(out) // 3 + 64):
        out[i] ^= 0x5A
    return bytes(out)
