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
	# The launcher really is a Mach-O for the target, and it embeds the interposer
	# built for the same target (the nested build in build.rs, through zig too):
	# a Mach-O dylib of the same CPU with an __interpose section, whose bytes are
	# inside the launcher. (tests/macos_interpose.rs checks the section's tuples.)
	target_dir=${CARGO_TARGET_DIR:-target}
	bin="$target_dir/$t/debug/sandpit"
	python3 - "$bin" "$target_dir/$t/debug/build" "$t" <<'PY'
import glob, os, struct, sys
exe, build, target = sys.argv[1], sys.argv[2], sys.argv[3]
# The build script's output of the newest build (stale ones may linger).
libs = glob.glob(os.path.join(build, "sandpit-*", "out", "libsandpit.dylib"))
assert libs, f"no embedded interposer under {build}"
lib = max(libs, key=os.path.getmtime)
want = {"aarch64-apple-darwin": 0x0100000C, "x86_64-apple-darwin": 0x01000007}[target]

def macho(path, filetype):
    data = open(path, "rb").read()
    magic, cputype, _, ftype, ncmds = struct.unpack_from("<IiiII", data, 0)
    assert magic == 0xFEEDFACF, f"{path}: not a 64-bit Mach-O (magic {magic:#x})"
    assert cputype == want, f"{path}: cputype {cputype:#x}, want {want:#x}"
    assert ftype == filetype, f"{path}: file type {ftype}, want {filetype}"
    sections, off = [], 32
    for _ in range(ncmds):
        cmd, size = struct.unpack_from("<II", data, off)
        if cmd == 0x19:  # LC_SEGMENT_64
            (nsects,) = struct.unpack_from("<I", data, off + 64)
            for j in range(nsects):
                s = off + 72 + 80 * j
                sections.append((data[s + 16:s + 32].rstrip(b"\0"), data[s:s + 16].rstrip(b"\0")))
        off += size
    return data, sections

exe_bytes, _ = macho(exe, 2)  # MH_EXECUTE
lib_bytes, sections = macho(lib, 6)  # MH_DYLIB
assert (b"__DATA", b"__interpose") in sections, f"{lib}: no __DATA,__interpose section"
assert lib_bytes in exe_bytes, f"{exe} does not embed {lib}"
print(f"{exe}: Mach-O executable, cputype {want:#x}, embeds {lib} ({len(lib_bytes)} bytes, __interpose present)")
PY
done
echo "== macos-cross: both Apple targets built in $((SECONDS - start))s"
