#!/usr/bin/env bash
# macOS cross-build: type-check, lint and cross-link the whole workspace for
# aarch64-apple-darwin and x86_64-apple-darwin with cargo-zigbuild (zig as the
# linker, no Apple SDK or frameworks). Nothing is run on a Mac: this proves the
# macOS code compiles, passes clippy and links, not that it behaves.
# The pure macOS parts (SBPL compiler, Mach-O inspection, mode choice) are tested on
# the host by `cargo test` (tests/macos_seatbelt.rs, tests/macos_inspect.rs).
#
# Called by .ci/run. Installs what a fresh machine lacks.
set -euo pipefail
cd "$(dirname "$0")/.."

TARGETS=(aarch64-apple-darwin x86_64-apple-darwin)

installed=$(rustup target list --installed)
for t in "${TARGETS[@]}"; do
	grep -qx "$t" <<<"$installed" || rustup target add "$t"
done
if ! python3 -m ziglang version >/dev/null 2>&1 || ! command -v cargo-zigbuild >/dev/null; then
	python3 -m pip install --quiet ziglang cargo-zigbuild
fi

start=$SECONDS
for t in "${TARGETS[@]}"; do
	echo "== macos-cross: clippy $t"
	# Through cargo-zigbuild so that C in dependencies (ring) has a compiler for the target.
	cargo-zigbuild clippy --target "$t" --workspace --all-targets -- -D warnings
	echo "== macos-cross: zigbuild $t"
	cargo zigbuild --target "$t" --workspace
	# The launcher really is a Mach-O for the target.
	bin="target/$t/debug/sandpit"
	python3 - "$bin" "$t" <<'PY'
import struct, sys
path, target = sys.argv[1], sys.argv[2]
magic, cputype = struct.unpack("<II", open(path, "rb").read(8))
want = {"aarch64-apple-darwin": 0x0100000C, "x86_64-apple-darwin": 0x01000007}[target]
assert magic == 0xFEEDFACF, f"{path}: not a 64-bit Mach-O (magic {magic:#x})"
assert cputype == want, f"{path}: cputype {cputype:#x}, want {want:#x}"
print(f"{path}: Mach-O 64-bit, cputype {cputype:#x}")
PY
done
echo "== macos-cross: both Apple targets built in $((SECONDS - start))s"
