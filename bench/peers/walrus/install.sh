#!/usr/bin/env bash
# Builds the walrus driver (crate walrus-rust 0.2.0, pinned with every other
# crate in Cargo.lock) into
# ${XDG_CACHE_HOME:-$HOME/.cache}/tern-bench/walrus/bin/walrus-bench.
set -euo pipefail
cd "$(dirname "$0")"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/tern-bench/walrus"

command -v cargo >/dev/null ||
	{ echo "walrus: cargo is not on PATH: install Rust (rustup, or apt-get install cargo) first" >&2; exit 1; }
mkdir -p "$cache/bin"
CARGO_TARGET_DIR="$cache/target" cargo build --release --locked ||
	{ echo "walrus: cargo build --release --locked failed (Cargo.lock out of date, or crates.io unreachable?)" >&2; exit 1; }
cp "$cache/target/release/walrus-bench" "$cache/bin/walrus-bench"
echo "walrus: driver $cache/bin/walrus-bench (walrus-rust 0.2.0)" >&2
