#!/usr/bin/env bash
# Installs the Debian packages MixNet builds and tests with. Idempotent; uses
# sudo when not root. Set MIXNET_SKIP_APT=1 to skip (packages already present).
set -euo pipefail
if [[ "${MIXNET_SKIP_APT:-0}" == 1 ]]; then exit 0; fi
SUDO=""
if [[ "$(id -u)" != 0 ]]; then SUDO="sudo"; fi
PACKAGES=(
  build-essential cmake ninja-build pkg-config git file lld
  libabsl-dev libyaml-cpp-dev libspdlog-dev libfmt-dev libcli11-dev nlohmann-json3-dev
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc openssl prometheus-cpp-dev
  libcpp-httplib-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libibverbs-dev librdmacm-dev libnl-3-dev libnl-route-3-dev
  libgloo-dev libopenmpi-dev openmpi-bin libglpk-dev
  iproute2 iputils-ping procps gnuplot-nox ccache curl
  python3-dev pybind11-dev python3-torch python3-yaml
)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
