#!/usr/bin/env bash
# The main job: installs packages, builds what the demo runs (not the tests,
# benchmarks or Python module), and runs mixnet-demo: one skewed, drifting
# MoE workload on an emulated 8-host cluster over five fabrics (EPS only, an
# oversubscribed EPS of MixNet's cost, MixNet's OCS with one static topology,
# MixNet with mixnet-ocsd + mixnet-controller re-wiring the OCS, and a
# non-blocking EPS), every all-to-all byte-checked. As root it uses network
# namespaces; without root it runs on loopback with the sim OCS (and says that
# its times mean nothing). Extra arguments go to mixnet-demo (see --help).
#   scripts/demo.sh --print-targets  the build targets it builds, one a line
#   scripts/demo.sh --check          builds them, then runs `--help` of every
#                                    program the demo starts (.ci/run does this
#                                    first, in a build folder with nothing else)
# Build settings (MIXNET_BUILD_DIR, MIXNET_CCACHE, ...): scripts/build.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
# mixnet-demo (orchestrator and workers) and the daemons it starts.
DEMO_TARGETS=(mixnet-demo mixnet-ocsd mixnet-controller)
if [[ "${1:-}" == --print-targets ]]; then
  printf '%s\n' "${DEMO_TARGETS[@]}"
  exit 0
fi
say() { echo "demo: $* (${SECONDS} s)" >&2; }
say "checking packages (scripts/install-deps.sh)"
./scripts/install-deps.sh >&2
say "building ${DEMO_TARGETS[*]} (empty cache: 4-6 minutes on 2 cores; warm: about 1)"
dir="$(./scripts/build.sh "${DEMO_TARGETS[@]}" | tail -n 1)"
demo="$dir/apps/demo/mixnet-demo"
if [[ "${1:-}" == --check ]]; then
  mapfile -t programs < <("$demo" binaries)
  for p in "${programs[@]}"; do
    if ! "$p" --help > /dev/null; then
      echo "demo: FAILED: '$p --help' (a program the demo starts; is its target in DEMO_TARGETS?)" >&2
      exit 1
    fi
    say "ok: $p --help"
  done
  say "check passed: ${#programs[@]} programs"
  exit 0
fi
say "running mixnet-demo $* (about 3 minutes at the defaults)"
exec "$demo" "$@"
