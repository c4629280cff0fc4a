#!/usr/bin/env bash
# What a cached adversary verdict costs (goal <= 1 ms): in-process, through the
# control socket, and as the extra time of `sandpit exec true` over the same run
# without an adversary. Everything runs against a fake endpoint on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo bench -p sandpit --bench adversary "$@"
