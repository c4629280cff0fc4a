#!/bin/sh
# open+close per call, bare vs under the interposer, at path depths 2/4/10.
# Builds release (the launcher embeds a release build of the library) and prints the
# ratios measured in this run. Goal: hooked ≤ 1.10× bare.
set -eu
cd "$(dirname "$0")/.."
exec cargo run --quiet --release -p sandpit --example dylib_bench
