#!/usr/bin/env bash
# The main job: installs packages, builds, and runs the all-to-all benchmark.
# As root it brings up the emulated cluster of examples/emulated_cluster
# (network namespaces, an EPS bridge and an OCS with circuits) and runs one rank
# per host; without root it runs 4 local ranks on loopback, with the Gloo and
# Open MPI peers for comparison.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
dir="$(./scripts/build.sh | tail -n 1)"
perf="$dir/bench/alltoall_perf/mixnet_alltoall_perf"
if [[ "$(id -u)" == 0 ]]; then
  echo "== all-to-all on the emulated cluster (examples/emulated_cluster/cluster.yaml)"
  "$perf" --fabric examples/emulated_cluster/cluster.yaml --sizes 64K,256K,1M --iters 5 --warmup 1
  echo
else
  echo "note: not root, so no emulated cluster (network namespaces need root); running on loopback"
fi
echo "== all-to-all, 4 local ranks over TCP loopback, with Gloo and Open MPI"
"$perf" --ranks 4 --transport tcp --sizes 1M,8M --peers
