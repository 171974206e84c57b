#!/usr/bin/env bash
# Regenerates the Python code of the gRPC API, src/tern/_pb/tern_pb2*.py(i),
# from api/ternpb/tern.proto with the pinned grpcio-tools (1.85.1, whose
# protoc generates for protobuf 7.35.1, the version pyproject.toml pins).
#
#   clients/python/gen.sh [OUTDIR]
#
# OUTDIR (default clients/python/src) is where tern/_pb/ is written:
# tests/test_generated.py generates into a temporary one and compares.
# PYTHON (default: the venv of scripts/install) must have grpcio-tools.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
out="${1:-$here/src}"
python="${PYTHON:-${XDG_CACHE_HOME:-$HOME/.cache}/tern/venv/bin/python}"
if ! "$python" -c 'import grpc_tools' 2>/dev/null; then
	echo "gen.sh: $python has no grpcio-tools: run scripts/install (or set PYTHON to a python with grpcio-tools==1.85.1)" >&2
	exit 1
fi
mkdir -p "$out/tern/_pb"
# The virtual path tern/_pb makes the generated modules import each other as
# tern._pb.tern_pb2, inside the package.
"$python" -m grpc_tools.protoc "-Itern/_pb=$repo/api/ternpb" \
	--python_out="$out" --pyi_out="$out" --grpc_python_out="$out" \
	tern/_pb/tern.proto
