#!/usr/bin/env bash
# Configures and builds MixNet into ${MIXNET_BUILD_DIR:-build}.
# MIXNET_SANITIZE=1 builds with ASan/UBSan (into build-asan by default).
set -euo pipefail
cd "$(dirname "$0")/.."
sanitize="${MIXNET_SANITIZE:-0}"
default_dir=build
[[ "$sanitize" == 1 ]] && default_dir=build-asan
dir="${MIXNET_BUILD_DIR:-$default_dir}"
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DMIXNET_SANITIZE=$([[ "$sanitize" == 1 ]] && echo ON || echo OFF) >/dev/null
cmake --build "$dir" -j"$(nproc)"
echo "$dir"
