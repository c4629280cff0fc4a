#!/usr/bin/env bash
# Type-check and cross-link every crate for both Apple targets with cargo-zigbuild.
# Nothing here runs on a Mac: the result is "cross-built, not run".
set -euo pipefail
cd "$(dirname "$0")/.."
for t in aarch64-apple-darwin x86_64-apple-darwin; do
  cargo zigbuild --workspace --target "$t"
done
