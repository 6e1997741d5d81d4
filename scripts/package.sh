#!/usr/bin/env bash
# Builds MixNet's Debian packages (cmake/MixnetPackaging.cmake: mixnet-common,
# mixnet-nccl-plugin, mixnet-ocsd, mixnet-controller, mixnet-tools,
# python3-mixnet) into <build folder>/packages and lists them.
# Configures and builds first (./scripts/build.sh, every target, build folder
# ${MIXNET_BUILD_DIR:-build}); MIXNET_SKIP_BUILD=1 packages the folder as it
# is built. Extra arguments go to cpack (e.g. -D CPACK_DEBIAN_PACKAGE_DEBUG=ON).
# Install on a Debian 12 machine with: apt-get install ./build/packages/*.deb
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ "${MIXNET_SKIP_BUILD:-0}" == 1 ]]; then
  dir="${MIXNET_BUILD_DIR:-build}"
else
  ./scripts/install-deps.sh >&2
  dir="$(./scripts/build.sh | tail -n 1)"
fi
[[ "${MIXNET_SANITIZE:-0}" != 1 ]] || { echo "package.sh: not with MIXNET_SANITIZE=1" >&2; exit 1; }
cd "$dir"
cpack -G DEB -B "$PWD/packages" "$@" >&2
rm -rf packages/_CPack_Packages
ls -1 "$PWD"/packages/*.deb
