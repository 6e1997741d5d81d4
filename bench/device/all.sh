#!/usr/bin/env bash
# Every device check of issue 25 in one run, for the GPU machine's short lease
# (about 15 minutes in all, machine start included): each check runs under its
# own timeout and the whole under TOTAL_S, so a hang costs one check, not the
# lease, and there is time left to rerun one check. In order:
#   1. kernels.sh: the gpu-label tests (MoE layout/permute/combine kernels with
#      CUDA-graph capture, the gate histogram) against their CPU references,
#      and mixnet_moe_kernels_bench's GB/s against the GPU's peak bandwidth;
#   2. nccl_plugin.sh: an NCCL all-to-all through our plugin and through NCCL's
#      Socket transport, every element checked, with the ratio;
#   3. verbs.sh: `ibv_devices`, and where an adapter exists the verbs suite in
#      loopback and NCCL over the plugin on verbs (it reports skipped, with the
#      reason, where there is none).
# Each check's JSON line and exit status go into one summary on stdout:
#   {"ok": bool, "seconds": N, "checks": {"kernels": {"rc": 0, "seconds": N,
#    "result": {...}}, ...}}
# Progress and the checks' logs go to stderr. Exit 0 when every check that
# ran passed.
# Knobs: CHECKS ("kernels nccl_plugin verbs": a subset to rerun one), TOTAL_S
# (600), KERNELS_S (300), NCCL_S (240), VERBS_S (240); the checks' own knobs
# (BUILD_DIR is not passed on: each builds in its own folder).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CHECKS=${CHECKS:-kernels nccl_plugin verbs}
TOTAL_S=${TOTAL_S:-600}
START=$(date +%s)
log() { echo "[all.sh $(date +%T)] $*" >&2; }
OUT=$(mktemp -d /tmp/mixnet_device_all.XXXXXX)
trap 'rm -rf "$OUT"' EXIT

nvidia-smi >&2 2>/dev/null || log "nvidia-smi: no GPU visible"
for check in $CHECKS; do
  case $check in
    kernels) limit=${KERNELS_S:-300} ;;
    nccl_plugin) limit=${NCCL_S:-240} ;;
    verbs) limit=${VERBS_S:-240} ;;
    *)
      log "unknown check '$check' (kernels, nccl_plugin, verbs)"
      exit 2
      ;;
  esac
  left=$((TOTAL_S - ($(date +%s) - START)))
  if ((left < 30)); then
    log "$check: not started, ${left} s left of TOTAL_S=$TOTAL_S"
    echo "-1 0" >"$OUT/$check.rc"
    continue
  fi
  ((limit > left)) && limit=$left
  log "$check: starting (limit ${limit} s)"
  t0=$(date +%s)
  env -u BUILD_DIR timeout --kill-after=10 "$limit" "$ROOT/bench/device/$check.sh" \
    >"$OUT/$check.json" 2> >(tee "$OUT/$check.log" >&2)
  rc=$?
  echo "$rc $(($(date +%s) - t0))" >"$OUT/$check.rc"
  ((rc == 124 || rc == 137)) && log "$check: timed out after ${limit} s"
  log "$check: exit $rc after $(($(date +%s) - t0)) s"
done

python3 - "$OUT" "$CHECKS" "$(($(date +%s) - START))" <<'PY'
import json, os, sys
out, checks, seconds = sys.argv[1], sys.argv[2].split(), int(sys.argv[3])
summary, ok = {}, True
for c in checks:
    rc, secs = (int(x) for x in open(os.path.join(out, c + ".rc")).read().split())
    result = None
    try:
        lines = open(os.path.join(out, c + ".json")).read().strip().splitlines()
        result = json.loads(lines[-1]) if lines else None
    except (OSError, ValueError) as e:
        result = {"error": f"no JSON from {c}.sh: {e}"}
    entry = {"rc": rc, "seconds": secs, "result": result}
    if rc == -1:
        entry["why"] = "not started: the total time ran out"
    elif rc in (124, 137):
        entry["why"] = "timed out"
    summary[c] = entry
    ok = ok and rc == 0
print(json.dumps({"ok": ok, "seconds": seconds, "checks": summary}))
sys.exit(0 if ok else 1)
PY
