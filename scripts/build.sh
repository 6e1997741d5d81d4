#!/usr/bin/env bash
# Configures and builds MixNet into ${MIXNET_BUILD_DIR:-build}; build logs go
# to stderr, the build folder's name to stdout.
# MIXNET_SANITIZE=1 builds with ASan/UBSan (into build-asan by default).
# Arguments name targets to build (default: all), e.g. mixnet_tests_cpu.
set -euo pipefail
cd "$(dirname "$0")/.."
sanitize="${MIXNET_SANITIZE:-0}"
default_dir=build
[[ "$sanitize" == 1 ]] && default_dir=build-asan
dir="${MIXNET_BUILD_DIR:-$default_dir}"
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DMIXNET_SANITIZE=$([[ "$sanitize" == 1 ]] && echo ON || echo OFF) >&2
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build "$dir" -j"$(nproc)" "${targets[@]}" >&2
echo "$dir"  # the only line on stdout: callers read the build folder from it
