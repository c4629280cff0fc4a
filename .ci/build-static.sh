#!/usr/bin/env bash
# The static launcher: `sandpit` for <arch>-unknown-linux-musl, linked static-pie by
# zig (cargo-zigbuild; `.ci/install` adds it and the musl target). Its start skips
# the dynamic loader and glibc's CPU-feature probing (`cpuid`, which traps under
# virtualisation) and keeps address-space randomisation; the interposer it embeds is
# still built for glibc (build.rs). About 1 ms less per `sandpit run` here
# (docs/kernel.md, *Cost*). Prints the binary's path on stdout.
# Usage: .ci/build-static.sh [--debug]
set -euo pipefail
cd "$(dirname "$0")/.."
arch=$(uname -m)
target="$arch-unknown-linux-musl"
profile=release
flags=(--release)
if [ "${1:-}" = --debug ]; then
  profile=debug
  flags=()
fi
if ! command -v cargo-zigbuild >/dev/null 2>&1; then
  echo "build-static: cargo-zigbuild is missing (python3 -m pip install ziglang cargo-zigbuild, or bash .ci/install)" >&2
  exit 1
fi
# zig links static-pie only when asked for it in so many words (it drops rustc's own
# request); the flags are for the musl target alone, not the glibc interposer.
var="CARGO_TARGET_$(echo "$target" | tr 'a-z-' 'A-Z_')_RUSTFLAGS"
export "$var=-C relocation-model=pie -C link-arg=-fPIE -C link-arg=-static-pie"
cargo zigbuild -q "${flags[@]}" -p sandpit --target "$target" >&2
bin="$PWD/target/$target/$profile/sandpit"
# static-pie: position-independent (type DYN) with no program interpreter.
if ! readelf -hW "$bin" | grep -q 'Type: *DYN' || readelf -lW "$bin" | grep -q INTERP; then
  echo "build-static: $bin is not a static-pie executable" >&2
  exit 1
fi
echo "$bin"
