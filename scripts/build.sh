#!/usr/bin/env bash
# Configures and builds MixNet into ${MIXNET_BUILD_DIR:-build}. Progress goes
# to stderr: one "build:" line per stage (configure; build, with the targets
# and jobs; done, with the steps ninja ran and ccache's hits and misses), each
# with the seconds since the script started, and the build's own log; stdout
# carries only the build folder's name (the last line).
# Arguments name targets to build (default: all), e.g. mixnet_tests_cpu.
# Settings (environment):
#   MIXNET_BUILD_DIR       the build folder (default build, or build-asan)
#   MIXNET_SANITIZE=1      ASan/UBSan build (into build-asan by default)
#   MIXNET_CCACHE          auto (default), on, off: compile through ccache
#   MIXNET_CCACHE_DIR      ccache's folder (default: the user's cache directory)
#   MIXNET_CCACHE_MAXSIZE  its size bound (default: ccache's own, 5 GB)
#   MIXNET_BUILD_JOBS      parallel compile jobs (default: the CPU count)
# (cmake/MixnetCcache.cmake documents the cache; docs/developers.md the loop.)
set -euo pipefail
cd "$(dirname "$0")/.."
stage() { echo "build: $* (${SECONDS} s)" >&2; }
sanitize="${MIXNET_SANITIZE:-0}"
default_dir=build
[[ "$sanitize" == 1 ]] && default_dir=build-asan
dir="${MIXNET_BUILD_DIR:-$default_dir}"
jobs="${MIXNET_BUILD_JOBS:-$(nproc)}"

defs=(-DCMAKE_BUILD_TYPE=RelWithDebInfo
  -DMIXNET_SANITIZE=$([[ "$sanitize" == 1 ]] && echo ON || echo OFF))
for var in MIXNET_CCACHE MIXNET_CCACHE_DIR MIXNET_CCACHE_MAXSIZE; do
  if [[ -n "${!var+x}" ]]; then defs+=("-D$var=${!var}"); fi
done
stage "configure $dir"
mkdir -p "$dir"
# CMake's own output goes to $dir/configure.log; its MixNet lines are shown.
if ! cmake -S . -B "$dir" -G Ninja "${defs[@]}" > "$dir/configure.log" 2>&1; then
  cat "$dir/configure.log" >&2
  stage "configure failed (log: $dir/configure.log)"
  exit 1
fi
grep -E "^-- MixNet" "$dir/configure.log" >&2 || true

targets=()
for t in "$@"; do targets+=("$t"); done
what="all targets"
((${#targets[@]})) && what="${#targets[@]} targets (${targets[*]})"
ccache_stats() {
  # hits and misses so far (ccache's machine-readable counters), or nothing.
  grep -q '^MIXNET_HAVE_CCACHE:INTERNAL=ON' "$dir/CMakeCache.txt" || return 0
  local prog cdir
  prog="$(sed -n 's/^MIXNET_CCACHE_PROGRAM:FILEPATH=//p' "$dir/CMakeCache.txt")"
  cdir="$(sed -n 's/^MIXNET_CCACHE_DIR:PATH=//p' "$dir/CMakeCache.txt")"
  if [[ -n "$cdir" ]]; then export CCACHE_DIR="$cdir"; fi
  "$prog" --print-stats 2>/dev/null | awk '
    $1 == "direct_cache_hit" || $1 == "preprocessed_cache_hit" { h += $2 }
    $1 == "cache_miss" { m += $2 } END { print h + 0, m + 0 }'
}
before="$(ccache_stats)"
stage "build $what, $jobs jobs"
t0=$SECONDS
tflags=()
for t in "${targets[@]}"; do tflags+=(--target "$t"); done
# The build's log is also kept in $dir/build.log.
if ! cmake --build "$dir" -j"$jobs" "${tflags[@]}" 2>&1 | tee "$dir/build.log" >&2; then
  stage "build failed (log: $dir/build.log)"
  exit 1
fi
# Steps ninja ran (its last "[k/N]" line), 0 when all was up to date.
steps="$(sed -n 's/^\[\([0-9]*\)\/\([0-9]*\)\].*/\2/p' "$dir/build.log" | tail -n 1)"
cache=""
after="$(ccache_stats)"
if [[ -n "$before" && -n "$after" ]]; then
  read -r h0 m0 <<< "$before"
  read -r h1 m1 <<< "$after"
  cache=", ccache $((h1 - h0)) hits $((m1 - m0)) misses"
fi
stage "done: $what, ${steps:-0} steps in $((SECONDS - t0)) s$cache"
echo "$dir"  # the only line on stdout: callers read the build folder from it
