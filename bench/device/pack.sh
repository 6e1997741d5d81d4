#!/usr/bin/env bash
# Builds the device checks' programs on a build host (this Debian machine,
# nvcc at /usr/local/cuda) and packs them with the shared libraries they need,
# so that a GPU node with no Debian packages and no package access -- only a
# CUDA driver, python3 and an NCCL somewhere -- runs bench/device/all.sh with
# MIXNET_DEVICE_PACK=<pack> and builds nothing. Runs here, not on the GPU node.
#
# The pack (default <repo>/.devpack, to be ignored by git and carried):
#   build/<same relative paths as a CMake build>: moe_kernels_gpu_test,
#     gate_histogram_gpu_test, moe_reference_test, mixnet_moe_kernels_bench,
#     libnccl-net-mixnet.so, mixnet_alltoall_perf (nccl_plugin.sh's transport
#     reference) and nccl_alltoall_check (nvcc, sm_80 + sm_90);
#   lib/: every shared library they load except the C library's own, the CUDA
#     driver (libcuda: the node's must match its kernel module) and NCCL
#     (libnccl.so.2 is 200+ MB; nccl_plugin.sh finds the node's);
#   lib-fallback/: libstdc++ and libgcc_s, used only when the node has none;
#   MANIFEST: what was built, from which commit, with which compiler.
# Knobs: PACK (<repo>/.devpack), BUILD_DIR (<repo>/build-devpack), JOBS (nproc),
# CUDA_HOME (/usr/local/cuda).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PACK=${PACK:-$ROOT/.devpack}
BUILD=${BUILD_DIR:-$ROOT/build-devpack}
JOBS=${JOBS:-$(nproc)}
CUDA=${CUDA_HOME:-/usr/local/cuda}
export PATH="$CUDA/bin:$PATH"
log() { echo "[pack.sh $(date +%T)] $*" >&2; }

command -v nvcc >/dev/null || { log "no nvcc at $CUDA/bin: the pack needs the CUDA compiler"; exit 1; }
log "configuring $BUILD (Release, CUDA on)"
mkdir -p "$BUILD"
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMIXNET_WITH_CUDA=ON \
  -DMIXNET_BUILD_TESTS=ON -DMIXNET_BUILD_BENCH=ON >"$BUILD/configure.log" 2>&1 ||
  { tail -30 "$BUILD/configure.log" >&2; exit 1; }
grep -q "cuda=ON" "$BUILD/configure.log" || { log "CMake did not enable CUDA"; exit 1; }
TARGETS=(tests/moe/moe_kernels_gpu_test tests/locality/gate_histogram_gpu_test
  tests/moe/moe_reference_test bench/moe_kernels/mixnet_moe_kernels_bench
  plugins/nccl_net/libnccl-net-mixnet.so bench/alltoall_perf/mixnet_alltoall_perf)
log "building ${#TARGETS[@]} targets (-j$JOBS)"
ninja -C "$BUILD" -j"$JOBS" moe_kernels_gpu_test gate_histogram_gpu_test moe_reference_test \
  mixnet_moe_kernels_bench nccl_net_mixnet mixnet_alltoall_perf >"$BUILD/build.log" 2>&1 ||
  { tail -40 "$BUILD/build.log" >&2; exit 1; }
log "building nccl_alltoall_check against $CUDA's NCCL"
nvcc -O2 -std=c++17 -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
  -o "$BUILD/nccl_alltoall_check" "$ROOT/bench/nccl_plugin/nccl_alltoall_check.cu" \
  -I"$CUDA/include" -L"$CUDA/lib64" -lnccl >&2
TARGETS+=(nccl_alltoall_check)

rm -rf "$PACK"
mkdir -p "$PACK/build" "$PACK/lib" "$PACK/lib-fallback"
declare -A libs=()
for t in "${TARGETS[@]}"; do
  mkdir -p "$PACK/build/$(dirname "$t")"
  cp "$BUILD/$t" "$PACK/build/$t"
  strip --strip-debug "$PACK/build/$t"
  # ldd lines: "name => /path (addr)"; the loader and vdso have no "=>".
  while read -r name arrow path _; do
    [[ $arrow == "=>" ]] || continue
    [[ $path == not ]] && { log "$t: $name not found here"; exit 1; }
    libs[$name]=$path
  done < <(ldd "$BUILD/$t")
done
for name in "${!libs[@]}"; do
  case $name in
    libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | ld-linux*) ;;
    libcuda.so.* | libnccl.so.*) ;;
    libstdc++.so.* | libgcc_s.so.*) cp -L "${libs[$name]}" "$PACK/lib-fallback/$name" ;;
    *) cp -L "${libs[$name]}" "$PACK/lib/$name" ;;
  esac
done
{
  dirty=""
  git -C "$ROOT" diff --quiet HEAD 2>/dev/null || dirty=" with uncommitted changes"
  echo "commit $(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)$dirty"
  echo "built $(date -u +%FT%TZ) on $(. /etc/os-release && echo "$PRETTY_NAME")"
  echo "g++ $(g++ -dumpfullversion), $(nvcc --version | tail -2 | head -1)"
  printf 'program %s\n' "${TARGETS[@]}"
} >"$PACK/MANIFEST"
log "packed ${#TARGETS[@]} programs and ${#libs[@]} libraries into $PACK ($(du -sh "$PACK" | cut -f1))"
