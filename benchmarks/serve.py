"""Requests per second and latency of a served model (`pipeline serve DATASET`, or any
`mlflow models serve` of the project's models), under a bounded load from 127.0.0.1.

    python benchmarks/serve.py http://127.0.0.1:5001 --dataset reuters --requests 400 --concurrency 4

A small asyncio client: `--concurrency` connections (kept alive), each sending its next request
when the last is answered, `--requests` requests in all per batch size, after `--warmup`
requests that are not counted. The inputs are real: the prepared test split's newswires as
text, or its digits as PNG files (base64), `--batch` rows per request (1 and 32 by default).
Prints, per batch size: requests/s, rows/s, and the latency's median (p50) and 99th percentile
(p99) in milliseconds; any answer but 200 is counted and shown, never timed.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import sys
import time
import urllib.parse
from pathlib import Path

import harness  # noqa: F401  (the repository first on sys.path, for pipeline.serving)
import numpy as np


def rows(dataset: str, data: Path, count: int) -> list[dict]:
    """`count` request rows of the test split, raw as a user has them (images as base64)."""
    from pipeline.data import prepared
    from pipeline.serving.classifier import raw_rows

    return [
        {k: base64.b64encode(v).decode("ascii") if isinstance(v, bytes) else v for k, v in row.items()}
        for row in raw_rows(prepared.read(data), count)
    ]


async def _client(url, bodies: list[bytes], queue: asyncio.Queue, latencies: list, failures: list) -> None:
    parts = urllib.parse.urlsplit(url)
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port or 80)
    try:
        while True:
            try:
                i = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            body = bodies[i % len(bodies)]
            head = (
                f"POST {parts.path.rstrip('/')}/invocations HTTP/1.1\r\nHost: {parts.netloc}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
            ).encode()
            started = time.perf_counter()
            writer.write(head + body)
            await writer.drain()
            status = int((await reader.readline()).split()[1])
            length = 0
            while (line := await reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode("latin-1").partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            await reader.readexactly(length)
            if i >= 0:  # warm-up requests carry negative numbers
                (latencies if status == 200 else failures).append(
                    time.perf_counter() - started if status == 200 else status
                )
    finally:
        writer.close()


async def measure(url: str, bodies: list[bytes], requests: int, concurrency: int, warmup: int) -> dict:
    for numbers in (range(-warmup, 0), range(requests)):  # the warm-up, then the counted run
        queue: asyncio.Queue = asyncio.Queue()
        for n in numbers:
            queue.put_nowait(n)
        latencies: list[float] = []
        failures: list[int] = []
        started = time.perf_counter()
        await asyncio.gather(*(_client(url, bodies, queue, latencies, failures) for _ in range(concurrency)))
        seconds = time.perf_counter() - started
    ms = np.array(latencies) * 1000
    return {
        "requests": requests,
        "ok": len(latencies),
        "failed": failures,
        "seconds": seconds,
        "requests_per_second": len(latencies) / seconds,
        "p50_ms": float(np.percentile(ms, 50)) if len(ms) else float("nan"),
        "p99_ms": float(np.percentile(ms, 99)) if len(ms) else float("nan"),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url", help="The server, e.g. http://127.0.0.1:5001 (`pipeline serve`'s).")
    parser.add_argument("--dataset", choices=("reuters", "mnist"), required=True)
    parser.add_argument("--data", type=Path, default=None, help="Prepared data [default: data/prepared/DATASET].")
    parser.add_argument("--requests", type=int, default=400, help="Requests per batch size, counted.")
    parser.add_argument("--concurrency", type=int, default=4, help="Connections sending at once.")
    parser.add_argument("--warmup", type=int, default=20, help="Requests sent first, not counted.")
    parser.add_argument("--batch", type=int, action="append", help="Rows per request (repeatable) [default: 1, 32].")
    parser.add_argument("--json", action="store_true", help="Print JSON, for scripts.")
    args = parser.parse_args(argv)
    host = urllib.parse.urlsplit(args.url).hostname
    if host not in ("127.0.0.1", "localhost", "::1"):
        parser.error(f"{args.url}: the load goes to this host only (127.0.0.1)")
    if min(args.requests, args.concurrency, *(args.batch or [1])) < 1 or args.warmup < 0:
        parser.error("--requests, --concurrency and --batch take positive numbers, --warmup 0 or more")
    batches = args.batch or [1, 32]
    data = args.data or Path("data/prepared") / args.dataset
    pool = rows(args.dataset, data, max(batches) * 8)
    if len(pool) < max(batches):
        parser.error(f"{data}: the test split has {len(pool)} samples, fewer than --batch {max(batches)}")
    results = []
    for batch in batches:
        bodies = [
            json.dumps({"dataframe_records": pool[i : i + batch]}).encode()
            for i in range(0, len(pool) - batch + 1, batch)
        ]
        figures = asyncio.run(measure(args.url, bodies, args.requests, args.concurrency, args.warmup))
        results.append(
            {
                "dataset": args.dataset,
                "batch": batch,
                "concurrency": args.concurrency,
                **figures,
                "rows_per_second": figures["requests_per_second"] * batch,
            }
        )
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print(f"{'batch':>5} {'requests':>8} {'req/s':>8} {'rows/s':>8} {'p50 ms':>8} {'p99 ms':>8}  failed")
        for r in results:
            print(
                f"{r['batch']:>5} {r['ok']:>8} {r['requests_per_second']:>8.1f} {r['rows_per_second']:>8.1f} "
                f"{r['p50_ms']:>8.1f} {r['p99_ms']:>8.1f}  {len(r['failed'])}"
            )
    return 1 if any(r["failed"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
