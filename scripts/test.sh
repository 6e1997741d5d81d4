#!/usr/bin/env bash
# The whole test suite on a fresh Debian machine: installs packages, configures,
# builds, runs ctest. Tests that need root (label netns), a GPU (gpu) or an
# RDMA device (rdma) skip with the reason when it is missing.
# Extra arguments go to ctest (e.g. -L cpu, -R alltoall).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
dir="$(./scripts/build.sh | tail -n 1)"
cd "$dir"
ctest --output-on-failure --timeout 900 "$@"
