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
#      and that NCCL really used the plugin asked for,
#   5. runs our TCP transport alone (mixnet_alltoall_perf, same ranks and
#      bytes, host memory, TCP over loopback): the ceiling the plugin's runs
#      would reach if NCCL's staging through the GPU were free, to tell which
#      side bounds them; and prints one JSON line: {"mixnet": {...},
#      "socket": {...}, "mixnet_over_socket": ratio,
#      "tcp_transport_host_memory": {...}, "mixnet_over_transport_alone": r}.
# Progress goes to stderr; stdout carries only the JSON. Exit 0 on success.
# Knobs: WORLD (4), BYTES per peer (8388608), ITERS (10), CUDA_HOME
# (/usr/local/cuda), NVCC_ARCH (-arch=sm_90), BUILD_DIR (<repo>/build-device),
# MIXNET_DEVICE_PACK (a pack made by pack.sh: steps 1-2 are skipped, its plugin
# and program are used, and NCCL's libnccl.so.2 is looked for on this node: in
# $CUDA_HOME, then in the Python packages nvidia.nccl and torch; NCCL_LIB_DIR
# names its folder outright).
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

PACK=${MIXNET_DEVICE_PACK:-}
if [[ -n $PACK ]]; then
  PACK=$(cd "$PACK" && pwd)
  # shellcheck source=bench/device/pack_env.sh
  . "$ROOT/bench/device/pack_env.sh"
  PLUGIN="$PACK/build/plugins/nccl_net/libnccl-net-mixnet.so"
  PROG="$PACK/build/nccl_alltoall_check"
  PERF="$PACK/build/bench/alltoall_perf/mixnet_alltoall_perf"
  nccl_dir=${NCCL_LIB_DIR:-}
  if [[ -z $nccl_dir ]]; then
    for d in "$CUDA/lib64" "$CUDA/lib" \
      "$(python3 -c 'import nvidia.nccl as m, os; print(os.path.join(list(m.__path__)[0], "lib"))' 2>/dev/null)" \
      "$(python3 -c 'import torch, os; print(os.path.join(os.path.dirname(torch.__file__), "lib"))' 2>/dev/null)"; do
      if [[ -n $d && -e $d/libnccl.so.2 ]]; then nccl_dir=$d; break; fi
    done
  fi
  [[ -n $nccl_dir && -e $nccl_dir/libnccl.so.2 ]] ||
    { log "no libnccl.so.2 on this node (CUDA_HOME, nvidia.nccl, torch); set NCCL_LIB_DIR"; exit 1; }
  log "NCCL from $nccl_dir"
  export LD_LIBRARY_PATH="$nccl_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  pack_env "$PACK" plugins/nccl_net/libnccl-net-mixnet.so nccl_alltoall_check \
    bench/alltoall_perf/mixnet_alltoall_perf || exit 1
else
  log "building the plugin in $BUILD"
  mkdir -p "$BUILD"
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMIXNET_WITH_CUDA=OFF \
    -DMIXNET_BUILD_TESTS=OFF -DMIXNET_BUILD_BENCH=ON >"$BUILD/configure.log" 2>&1 ||
    { tail -30 "$BUILD/configure.log" >&2; exit 1; }
  ninja -C "$BUILD" nccl_net_mixnet mixnet_alltoall_perf >&2
  PERF="$BUILD/bench/alltoall_perf/mixnet_alltoall_perf"
  PLUGIN="$BUILD/plugins/nccl_net/libnccl-net-mixnet.so"
  [[ -f $PLUGIN ]] || { log "no plugin at $PLUGIN"; exit 1; }

  log "building the all-to-all program ($ARCH)"
  PROG="$BUILD/nccl_alltoall_check"
  # shellcheck disable=SC2086  # ARCH may hold several flags
  nvcc -O2 -std=c++17 $ARCH -o "$PROG" "$ROOT/bench/nccl_plugin/nccl_alltoall_check.cu" \
    -I"$CUDA/include" -L"$CUDA/lib64" -lnccl -Xlinker -rpath -Xlinker "$CUDA/lib64" >&2
fi
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
  # Which NCCL and which of its network settings ran, for the record.
  grep -hE "NCCL version|NET/(Plugin|Socket|mixnet)|Using network" "$dir/nccl.0.log" |
    grep -v "Channel" | sed 's/^[^]]*\] //' | sort -u | head -8 | sed "s/^/[$name] /" >&2 || true
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

# What our TCP transport alone does between the same number of processes on
# host memory over loopback (no GPU, no NCCL): the ceiling the plugin runs
# would reach if NCCL's staging through the GPU cost nothing.
TCP_JSON=null
if [[ -n $PERF && -x $PERF ]]; then
  log "run 3: our TCP transport alone (mixnet_alltoall_perf, host memory, MIXNET_INTRA_HOST=nic)"
  TCP_JSON=$(MIXNET_INTRA_HOST=nic MIXNET_SOCKET_IFNAME=lo timeout 120 "$PERF" --ranks "$WORLD" \
    --sizes "$BYTES" --iters "$ITERS" --json 2>/dev/null | tail -1) || TCP_JSON=null
  [[ -n $TCP_JSON ]] || TCP_JSON=null
  log "tcp transport alone: $TCP_JSON"
fi

python3 - "$MIXNET_JSON" "$SOCKET_JSON" "$TCP_JSON" <<'PY'
import json, sys
m, s, t = json.loads(sys.argv[1]), json.loads(sys.argv[2]), json.loads(sys.argv[3])
ratio = m["busbw_gbytes_per_s"] / s["busbw_gbytes_per_s"] if s["busbw_gbytes_per_s"] else None
out = {"bench": "nccl_plugin_device", "mixnet": m, "socket": s, "mixnet_over_socket": ratio}
if t:
    out["tcp_transport_host_memory"] = t
    out["mixnet_over_transport_alone"] = m["busbw_gbytes_per_s"] / t["busbw_GBps"]
print(json.dumps(out))
PY
