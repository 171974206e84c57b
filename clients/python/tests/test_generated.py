"""The generated modules in src/tern/_pb are what gen.sh makes of
api/ternpb/tern.proto now: a change of the proto without ./gen.sh fails here."""

import filecmp
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]


def test_generated_code_is_fresh(tmp_path):
    env = dict(os.environ, PYTHON=sys.executable)
    subprocess.run([str(HERE / "gen.sh"), str(tmp_path)], check=True, env=env)
    checked_in = HERE / "src" / "tern" / "_pb"
    fresh = tmp_path / "tern" / "_pb"
    names = sorted(p.name for p in fresh.iterdir())
    assert names == ["tern_pb2.py", "tern_pb2.pyi", "tern_pb2_grpc.py"]
    stale = [n for n in names if not (checked_in / n).exists() or not filecmp.cmp(fresh / n, checked_in / n, shallow=False)]
    assert not stale, f"{stale} in {checked_in} are stale: run clients/python/gen.sh and commit them"
