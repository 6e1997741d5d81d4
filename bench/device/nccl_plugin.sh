#!/usr/bin/env bash
# GPU check of the NCCL net plugin (issue 6), for a machine with one GPU; takes
# well under 5 minutes. It
#   1. builds libnccl-net-mixnet.so from this tree (cmake + ninja, plugin only),
#   2. builds bench/nccl_plugin/nccl_alltoall_check.cu with nvcc against
#      $CUDA_HOME's NCCL,
#   3. runs an NCCL all-to-all (grouped ncclSend/ncclRecv) across $WORLD
#      processes sharing GPU 0, each with its own NCCL_HOSTID so NCCL treats
#      them as separate hosts and moves every byte through a net plugin:
#      once with ours (NCCL_NET_PLUGIN=<abs path>, NCCL_NET=mixnet) and once with
#      NCCL's built-in Socket transport (NCCL_NET=Socket), both on loopback,
#   4. checks every received element (the program exits non-zero otherwise)
#      and that NCCL really used the plugin asked for, and prints one JSON line:
#      {"mixnet": {...}, "socket": {...}, "mixnet_over_socket": ratio}.
# Progress goes to stderr; stdout carries only the JSON. Exit 0 on success.
# Knobs: WORLD (4), BYTES per peer (8388608), ITERS (10), CUDA_HOME
# (/usr/local/cuda), NVCC_ARCH (-arch=sm_90), BUILD_DIR (<repo>/build-device).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build-device}
WORLD=${WORLD:-4}
BYTES=${BYTES:-8388608}
ITERS=${ITERS:-10}
CUDA=${CUDA_HOME:-/usr/local/cuda}
ARCH=${NVCC_ARCH:--arch=sm_90}
export PATH="$CUDA/bin:$PATH"
log() { echo "[nccl_plugin.sh $(date +%T)] $*" >&2; }

log "building the plugin in $BUILD"
mkdir -p "$BUILD"
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMIXNET_WITH_CUDA=OFF \
  -DMIXNET_BUILD_TESTS=OFF -DMIXNET_BUILD_BENCH=OFF >"$BUILD/configure.log" 2>&1 ||
  { tail -30 "$BUILD/configure.log" >&2; exit 1; }
ninja -C "$BUILD" nccl_net_mixnet >&2
PLUGIN="$BUILD/plugins/nccl_net/libnccl-net-mixnet.so"
[[ -f $PLUGIN ]] || { log "no plugin at $PLUGIN"; exit 1; }

log "building the all-to-all program ($ARCH)"
PROG="$BUILD/nccl_alltoall_check"
# shellcheck disable=SC2086  # ARCH may hold several flags
nvcc -O2 -std=c++17 $ARCH -o "$PROG" "$ROOT/bench/nccl_plugin/nccl_alltoall_check.cu" \
  -I"$CUDA/include" -L"$CUDA/lib64" -lnccl -Xlinker -rpath -Xlinker "$CUDA/lib64" >&2
nvidia-smi -L >&2 || true

# run_case NAME EXPECT_REGEX ENV...: one all-to-all job; prints rank 0's JSON.
run_case() {
  local name=$1 expect=$2
  shift 2
  local dir
  dir=$(mktemp -d "/tmp/nccl_plugin_$name.XXXXXX")
  local pids=() r rc=0
  for ((r = 0; r < WORLD; r++)); do
    env "$@" NCCL_HOSTID="mixnet-check-host$r" NCCL_SOCKET_IFNAME=lo \
      NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NVLS_ENABLE=0 NCCL_MNNVL_ENABLE=0 \
      NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET NCCL_DEBUG_FILE="$dir/nccl.$r.log" \
      timeout 90 "$PROG" "$r" "$WORLD" "$dir/id" "$BYTES" "$ITERS" \
      >"$dir/out.$r" 2>"$dir/err.$r" &
    pids+=($!)
  done
  for ((r = 0; r < WORLD; r++)); do
    wait "${pids[$r]}" || { rc=$?; log "$name: rank $r exited $rc: $(tail -3 "$dir/err.$r")"; }
  done
  if ((rc != 0)); then
    tail -20 "$dir"/nccl.*.log >&2 || true
    return 1
  fi
  if ! grep -qiE "$expect" "$dir"/nccl.*.log; then
    log "$name: NCCL's log does not show the expected network (/$expect/):"
    grep -hiE "NET/|Using network" "$dir"/nccl.0.log | head -10 >&2 || true
    return 1
  fi
  cat "$dir/out.0"
  rm -rf "$dir"
}

log "run 1: our plugin ($PLUGIN)"
MIXNET_JSON=$(run_case mixnet "NET/mixnet|Using network mixnet" \
  NCCL_NET_PLUGIN="$PLUGIN" NCCL_NET=mixnet MIXNET_SOCKET_IFNAME=lo)
log "mixnet: $MIXNET_JSON"
log "run 2: NCCL's built-in Socket transport"
SOCKET_JSON=$(run_case socket "Using network Socket|NET/Socket" \
  NCCL_NET_PLUGIN=none NCCL_NET=Socket)
log "socket: $SOCKET_JSON"

python3 - "$MIXNET_JSON" "$SOCKET_JSON" <<'PY'
import json, sys
m, s = json.loads(sys.argv[1]), json.loads(sys.argv[2])
ratio = m["busbw_gbytes_per_s"] / s["busbw_gbytes_per_s"] if s["busbw_gbytes_per_s"] else None
print(json.dumps({"bench": "nccl_plugin_device", "mixnet": m, "socket": s,
                  "mixnet_over_socket": ratio}))
PY
