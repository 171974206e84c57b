#!/usr/bin/env python3
"""1 KiB appends per second from Python, synchronous and pipelined, against
the Go client (`tern bench`) on the same server in the same run.

    ~/.cache/tern/venv/bin/python clients/python/bench.py [--duration 5] [--in-flight 256] [--runs 3]

It builds tern from this checkout (or takes --tern BIN), starts a `tern serve`
on 127.0.0.1 ports of its own with a data directory in a temporary directory
(or uses --server ADDR), and for each run measures, one after the other:
Go synchronous, Python synchronous, Go pipelined, Python pipelined. It
prints the median of the runs as a Markdown table (docs/benchmarks/notes.md
keeps the figures).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "src"))

import tern  # noqa: E402

REPO = HERE.parents[1]
PAYLOAD = os.urandom(1024)


def python_sync(log: tern.Log, seconds: float) -> dict:
    lat = []
    with log.open_writer() as w:
        end = time.monotonic() + seconds
        while (t0 := time.monotonic()) < end:
            w.append(PAYLOAD)
            lat.append(time.monotonic() - t0)
    lat.sort()
    return {"entries_per_s": len(lat) / seconds, "p50_us": lat[len(lat) // 2] * 1e6,
            "p99_us": lat[int(len(lat) * 0.99)] * 1e6}


def python_pipelined(log: tern.Log, seconds: float, in_flight: int) -> dict:
    n = 0
    window: collections.deque = collections.deque()
    with log.open_writer() as w:
        start = time.monotonic()
        end = start + seconds
        while time.monotonic() < end:
            if len(window) >= in_flight:
                window.popleft().result()
                n += 1
            window.append(w.append_async(PAYLOAD))
        elapsed = time.monotonic() - start
        for f in window:  # answered after the measured time: not counted
            f.result()
    return {"entries_per_s": n / elapsed}


def go_bench(binary: Path, addr: str, seconds: float, in_flight: int) -> dict:
    cmd = [str(binary), "--server", addr, "bench", "--entry-bytes", "1024", "--batch", "1", "--producers", "1",
           "--duration", f"{seconds}s", "--json", "-"]
    if in_flight:
        cmd += ["--in-flight", str(in_flight)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    r = json.loads([line for line in out.splitlines() if line.startswith("{")][-1])
    return {"entries_per_s": r["entries_per_s"], "p50_us": r["latency_us"]["p50"], "p99_us": r["latency_us"]["p99"]}


def start_server(binary: Path, data: Path) -> tuple[subprocess.Popen, str]:
    sys.path.insert(0, str(HERE / "tests"))
    from conftest import free_port

    addr, http = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    p = subprocess.Popen([str(binary), "serve", "--data", str(data), "--listen", addr, "--http", http,
                          "--log-level", "warn"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(3000):
        try:
            with urllib.request.urlopen(f"http://{http}/readyz", timeout=2) as r:
                if r.status == 200:
                    return p, addr
        except OSError:
            time.sleep(0.02)
    p.kill()
    raise SystemExit("bench: tern serve was not ready within a minute")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=5.0, help="seconds of each measurement")
    ap.add_argument("--in-flight", type=int, default=256, help="appends in flight when pipelined")
    ap.add_argument("--runs", type=int, default=3, help="runs; the median is reported")
    ap.add_argument("--tern", type=Path, help="the tern binary (default: built from this checkout)")
    ap.add_argument("--server", help="a running tern serve (default: one started here)")
    a = ap.parse_args()

    binary = a.tern
    if binary is None:
        binary = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "tern" / "bench" / "tern"
        subprocess.run(["go", "build", "-o", str(binary), "./cmd/tern"], cwd=REPO, check=True)
    with tempfile.TemporaryDirectory() as tmp:
        proc, addr = (None, a.server) if a.server else start_server(binary, Path(tmp) / "data")
        try:
            c = tern.connect(addr)
            results: dict[str, list[dict]] = collections.defaultdict(list)
            for run in range(a.runs):
                results["Go, synchronous"].append(go_bench(binary, addr, a.duration, 0))
                results["Python, synchronous"].append(
                    python_sync(c.create_log(f"pybench/{time.time_ns()}-sync"), a.duration))
                results[f"Go, pipelined ({a.in_flight} in flight)"].append(
                    go_bench(binary, addr, a.duration, a.in_flight))
                results[f"Python, pipelined ({a.in_flight} in flight)"].append(
                    python_pipelined(c.create_log(f"pybench/{time.time_ns()}-async"), a.duration, a.in_flight))
                print(f"bench: run {run + 1} of {a.runs} done", file=sys.stderr)
            c.close()
        finally:
            if proc is not None:
                proc.terminate()
                proc.wait()
    print(f"| client, appends of 1 KiB | entries/s (median of {a.runs}, {a.duration:g} s each) | p50 | p99 |")
    print("|---|---:|---:|---:|")
    for what, rs in results.items():
        rate = statistics.median(r["entries_per_s"] for r in rs)
        p50 = f"{statistics.median(r['p50_us'] for r in rs):,.0f} µs" if "p50_us" in rs[0] else "—"
        p99 = f"{statistics.median(r['p99_us'] for r in rs):,.0f} µs" if "p99_us" in rs[0] else "—"
        print(f"| {what} | {rate:,.0f} | {p50} | {p99} |")


if __name__ == "__main__":
    main()
