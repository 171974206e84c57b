"""Fixtures of the Python client's tests: a real `tern serve`, built from this
checkout, on 127.0.0.1 ports picked here, stopped by its PID."""

from __future__ import annotations

import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

INSTALL = "scripts/install (it makes the venv ~/.cache/tern/venv with the pinned packages)"
try:
    import grpc  # noqa: F401
    import google.protobuf  # noqa: F401
    import grpc_tools  # noqa: F401
except ImportError as e:  # a missing dependency fails the run, naming the command that installs it
    pytest.exit(f"the Python client's tests need {e.name}: run {INSTALL}, then ~/.cache/tern/venv/bin/pytest "
                "clients/python/tests", returncode=1)

REPO = Path(__file__).resolve().parents[3]
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "tern"
READY_TIMEOUT = 60.0


@pytest.fixture(scope="session")
def tern_bin() -> Path:
    """The tern binary of this checkout: $TERN_BIN, or built into the user cache
    with the race detector: scripts/test runs go test -race first, whose
    compiled packages the build reuses (a build without -race would compile
    everything again), and the server's races fail these tests too."""
    if os.environ.get("TERN_BIN"):
        return Path(os.environ["TERN_BIN"])
    out = CACHE / "pytest" / "tern-race"
    try:
        subprocess.run(["go", "build", "-race", "-o", str(out), "./cmd/tern"], cwd=REPO, check=True,
                       capture_output=True, text=True)
    except FileNotFoundError:
        pytest.fail("building tern needs Go 1.26 on PATH (https://go.dev/dl/); then run scripts/install")
    except subprocess.CalledProcessError as e:
        pytest.fail(f"go build ./cmd/tern failed:\n{e.stderr}")
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A tern serve process. start waits for /readyz; stop sends SIGTERM (kill:
    SIGKILL) to its PID and waits; a restart keeps its data and ports."""

    def __init__(self, binary: Path, data: Path, args: list[str] | None = None, ca: Path | None = None) -> None:
        self.binary = binary
        self.data = data
        self.args = args or []
        self.ca = ca  # with TLS: the CA of the server's certificate, for /readyz
        self.addr = f"127.0.0.1:{free_port()}"
        self.http = f"127.0.0.1:{free_port()}"
        self.proc: subprocess.Popen | None = None
        self.logfile = data.parent / (data.name + ".log")

    def start(self) -> None:
        cmd = [str(self.binary), "serve", "--data", str(self.data), "--listen", self.addr, "--http", self.http,
               "--log-level", "warn", *self.args]
        log = open(self.logfile, "ab")
        log.write(("--- " + " ".join(cmd) + "\n").encode())
        log.flush()
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=log)
        log.close()
        scheme, ctx = "http", None
        if self.ca is not None:
            scheme, ctx = "https", ssl.create_default_context(cafile=str(self.ca))
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            try:
                with urllib.request.urlopen(f"{scheme}://{self.http}/readyz", timeout=2, context=ctx) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            if self.proc.poll() is not None:
                pytest.fail(f"tern serve exited ({self.proc.returncode}) before it was ready:\n{self.tail()}")
            if time.monotonic() > deadline:
                pytest.fail(f"tern serve was not ready within {READY_TIMEOUT}s:\n{self.tail()}")
            time.sleep(0.02)

    def tail(self) -> str:
        try:
            return self.logfile.read_text(errors="replace")[-8000:]
        except OSError:
            return ""

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is not None:
            # Not stopped by the test: it exited on its own (a crash, or a
            # race the race detector found: exit status 66).
            rc, self.proc = self.proc.returncode, None
            pytest.fail(f"tern serve exited on its own with status {rc}:\n{self.tail()}")
        os.kill(self.proc.pid, sig)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        rc, self.proc = self.proc.returncode, None
        if rc == 66:  # the race detector's exit status
            pytest.fail(f"tern serve found a data race:\n{self.tail()}")

    def kill(self) -> None:
        self.stop(signal.SIGKILL)


@pytest.fixture(scope="session")
def server(tern_bin, tmp_path_factory) -> Server:
    """One server for the tests that need nothing special of it: each uses logs
    of its own names."""
    s = Server(tern_bin, tmp_path_factory.mktemp("serve") / "data")
    s.start()
    yield s
    s.stop()


@pytest.fixture
def fresh_server(tern_bin, tmp_path):
    """A server of the test's own, which it may stop and restart."""
    s = Server(tern_bin, tmp_path / "data")
    s.start()
    yield s
    s.stop()


@pytest.fixture
def client(server):
    import tern

    c = tern.connect(server.addr)
    yield c
    c.close()


@pytest.fixture
def name(request) -> str:
    """A log name of the test's own."""
    return "py/" + request.node.name.replace("[", "-").replace("]", "").replace("_", "-")[:200]


def pytest_report_header(config):
    return f"python {sys.version.split()[0]}, repo {REPO}"
