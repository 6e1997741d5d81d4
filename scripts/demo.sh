#!/usr/bin/env bash
# The main job: installs packages, builds, and runs mixnet-demo: one skewed,
# drifting MoE workload on an emulated 8-host cluster over three fabrics (EPS
# only, MixNet with mixnet-ocsd + mixnet-controller re-wiring the OCS, and a
# non-blocking EPS), every all-to-all byte-checked. As root it uses network
# namespaces; without root it runs on loopback with the sim OCS (and says that
# its times mean nothing). Extra arguments go to mixnet-demo (see --help).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
dir="$(./scripts/build.sh | tail -n 1)"
exec "$dir/apps/demo/mixnet-demo" "$@"
