#!/usr/bin/env bash
# RDMA check of the verbs transport and the NCCL plugin over it (issue 23 item
# 8), for a machine with an RDMA adapter (and, for the NCCL part, a GPU). It
#   1. lists the adapters (sysfs /sys/class/infiniband, and `ibv_devices` /
#      `ibv_devinfo` when installed) and picks one: $MIXNET_IB_DEVICE, else the
#      first with an ACTIVE port;
#   2. builds the transport tests from this tree (cmake + ninja, no CUDA),
#   3. runs the transport conformance suite's verbs cases (transport_test,
#      */verbs_*: every message size, FIFO per tag, unexpected messages, the
#      rendezvous and its bound, failures) in loopback on that one adapter,
#      then the verbs unit tests,
#   4. runs bench/device/nccl_plugin.sh with MIXNET_TRANSPORT=verbs: an NCCL
#      all-to-all between processes on GPU 0 whose every byte goes through our
#      plugin over verbs, twice: with GPUDirect RDMA required
#      (MIXNET_NCCL_GPU_DIRECT=on, NCCL_NET_GDR_LEVEL=SYS: the NIC reads and
#      writes the GPU buffers; skipped with the plugin's reason when neither
#      dma-buf nor peer memory works) and with it off (NCCL stages the GPU
#      buffers through host memory),
#   5. prints what ran, what was skipped and why, one line each on stderr,
#      and one JSON object on stdout: {"adapter": ..., "ran": [...],
#      "skipped": [{"what": ..., "why": ...}], "failed": [...]}.
# Exit 0 when nothing failed (skips are not failures: a machine without an
# adapter prints why and exits 0), 1 otherwise.
# Knobs: MIXNET_IB_DEVICE (adapter), BUILD_DIR (<repo>/build-device-verbs),
# CUDA_HOME (/usr/local/cuda), NCCL_CHECK=0 to leave out step 4.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build-device-verbs}
CUDA=${CUDA_HOME:-/usr/local/cuda}
log() { echo "[verbs.sh $(date +%T)] $*" >&2; }
RAN=()
SKIPPED=()
FAILED=()
ADAPTER=""
ran() { RAN+=("$1"); log "ran: $1"; }
skipped() { SKIPPED+=("$1"$'\t'"$2"); log "skipped: $1: $2"; }
failed() { FAILED+=("$1"); log "FAILED: $1"; }

json_escape() { python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$1"; }
report() {
  local out="{\"adapter\": $(json_escape "$ADAPTER"), \"ran\": [" sep="" e
  for e in "${RAN[@]}"; do out+="$sep$(json_escape "$e")"; sep=", "; done
  out+="], \"skipped\": ["
  sep=""
  for e in "${SKIPPED[@]}"; do
    out+="$sep{\"what\": $(json_escape "${e%%$'\t'*}"), \"why\": $(json_escape "${e#*$'\t'}")}"
    sep=", "
  done
  out+="], \"failed\": ["
  sep=""
  for e in "${FAILED[@]}"; do out+="$sep$(json_escape "$e")"; sep=", "; done
  echo "$out]}"
  ((${#FAILED[@]} == 0))
}

# 1. Adapters.
adapters=()
if [[ -d /sys/class/infiniband ]]; then
  for d in /sys/class/infiniband/*; do [[ -e $d ]] && adapters+=("$(basename "$d")"); done
fi
if command -v ibv_devices >/dev/null; then ibv_devices >&2 || true; fi
if ((${#adapters[@]} == 0)); then
  skipped "verbs transport suite" "no RDMA adapter: /sys/class/infiniband is empty or absent (no RDMA NIC or its driver is not loaded)"
  skipped "NCCL plugin over verbs" "no RDMA adapter"
  report
  exit $?
fi
port_active() {  # adapter -> 0 when one of its ports is ACTIVE
  grep -qs ACTIVE /sys/class/infiniband/"$1"/ports/*/state
}
if [[ -n ${MIXNET_IB_DEVICE:-} ]]; then
  ADAPTER=$MIXNET_IB_DEVICE
else
  for a in "${adapters[@]}"; do
    if port_active "$a"; then ADAPTER=$a; break; fi
  done
fi
for a in "${adapters[@]}"; do
  for p in /sys/class/infiniband/"$a"/ports/*; do
    [[ -e $p ]] || continue
    log "adapter $a port $(basename "$p"): $(cat "$p/state" 2>/dev/null), link layer" \
      "$(cat "$p/link_layer" 2>/dev/null), rate $(cat "$p/rate" 2>/dev/null)"
  done
done
if [[ -z $ADAPTER ]]; then
  skipped "verbs transport suite" "no adapter has an ACTIVE port (${adapters[*]}); set MIXNET_IB_DEVICE to force one"
  skipped "NCCL plugin over verbs" "no adapter has an ACTIVE port"
  report
  exit $?
fi
export MIXNET_IB_DEVICE=$ADAPTER
log "using adapter $ADAPTER"
if command -v ibv_devinfo >/dev/null; then ibv_devinfo -d "$ADAPTER" >&2 || true; fi

# 2. Build.
log "building the transport tests in $BUILD"
mkdir -p "$BUILD"
if ! cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DMIXNET_WITH_CUDA=OFF -DMIXNET_BUILD_BENCH=OFF >"$BUILD/configure.log" 2>&1; then
  tail -30 "$BUILD/configure.log" >&2
  failed "configure"
  report
  exit 1
fi
if ! ninja -C "$BUILD" transport_test verbs_unit_test >"$BUILD/build.log" 2>&1; then
  tail -30 "$BUILD/build.log" >&2
  failed "build"
  report
  exit 1
fi

# 3. The conformance suite's verbs cases and the unit tests. A case that
# skips says why in its output (GTEST_SKIP); those are counted apart.
run_gtest() {  # name binary filter
  local name=$1 bin=$2 filter=$3 out
  out=$(mktemp)
  if "$bin" --gtest_filter="$filter" --gtest_brief=0 >"$out" 2>&1; then
    local passed skip
    passed=$(grep -c '^\[       OK \]' "$out")
    skip=$(grep -c '^\[  SKIPPED \]' "$out")
    if ((passed == 0 && skip > 0)); then
      skipped "$name" "$(grep -m1 -iE 'unavailable|skipped' "$out" | head -c 300)"
    else
      ran "$name: $passed passed, $skip skipped"
      grep -A1 '^\[  SKIPPED \]' "$out" | grep -v '^\[' | sort -u | head -5 >&2 || true
    fi
  else
    tail -40 "$out" >&2
    failed "$name: $(grep -c '^\[  FAILED  \]' "$out") failed (output above)"
  fi
  rm -f "$out"
}
run_gtest "transport_test verbs cases on $ADAPTER (loopback)" "$BUILD/tests/transport/transport_test" '*/verbs_*'
run_gtest "verbs_unit_test" "$BUILD/tests/transport/verbs/verbs_unit_test" '*'

# 4. NCCL over the plugin over verbs.
if [[ ${NCCL_CHECK:-1} == 0 ]]; then
  skipped "NCCL plugin over verbs" "NCCL_CHECK=0"
elif ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  skipped "NCCL plugin over verbs" "no GPU (nvidia-smi lists none)"
elif [[ ! -f $CUDA/include/nccl.h ]]; then
  skipped "NCCL plugin over verbs" "no NCCL under $CUDA"
else
  for gdr in on off; do
    out=$(mktemp)
    what="NCCL all-to-all through the plugin over verbs on $ADAPTER, GPUDirect $gdr"
    if MIXNET_TRANSPORT=verbs MIXNET_NCCL_GPU_DIRECT=$gdr NCCL_NET_GDR_LEVEL=SYS \
      BUILD_DIR="$BUILD-nccl" CUDA_HOME="$CUDA" \
      "$ROOT/bench/device/nccl_plugin.sh" >"$out" 2>"$out.err"; then
      ran "$what: $(head -c 400 "$out")"
      # What the plugin decided per device, and whether NCCL used GDR.
      grep -h -o 'NCCL device [^:]*: [^"]*' "$out.err" | sort -u | head -4 >&2 || true
      grep -h -i -o 'GDRDMA[^"]*' "$out.err" | sort -u | head -2 >&2 || true
    elif [[ $gdr == on ]] && grep -q 'MIXNET_NCCL_GPU_DIRECT=on, but' "$out.err"; then
      skipped "$what" "$(grep -h -o 'MIXNET_NCCL_GPU_DIRECT=on, but[^"]*' "$out.err" | head -1)"
    else
      tail -30 "$out.err" >&2
      failed "$what (see above)"
    fi
    rm -f "$out" "$out.err"
  done
fi
report
