#!/usr/bin/env bash
# install_consumer_test (label cpu): `cmake --install --component dev` of the
# build folder into a temporary prefix, then configures, builds and runs the
# project in consumer/ against it (find_package(MixNet CONFIG), MixNet::runtime)
# and compares its route table with the one worked out by hand from
# consumer/cluster.yaml (router v1: a circuit gives one OCS path at the
# slower end's speed, otherwise the EPS NICs at the slower one's).
# Usage: consumer_test.sh BUILD_DIR CXX_COMPILER [COMPILER_LAUNCHER]
set -euo pipefail
build="$1" cxx="$2" launcher="${3:-}"
here="$(cd "$(dirname "$0")" && pwd)"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/mixnet-consumer.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

cmake --install "$build" --prefix "$tmp/prefix" --component dev >"$tmp/install.log"
# The installed package must not point back into the build or source tree.
if grep -rlF -e "$build" -e "$(cd "$here/../.." && pwd)/runtime" "$tmp/prefix/lib" --include='*.cmake'; then
  echo "FAIL: installed CMake files name the build or source tree" >&2
  exit 1
fi
args=(-G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER="$cxx"
  -DCMAKE_PREFIX_PATH="$tmp/prefix")
[[ -n "$launcher" ]] && args+=(-DCMAKE_CXX_COMPILER_LAUNCHER="$launcher")
cmake -S "$here/consumer" -B "$tmp/build" "${args[@]}" >"$tmp/configure.log" ||
  { cat "$tmp/configure.log"; exit 1; }
cmake --build "$tmp/build" >"$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; exit 1; }

got="$("$tmp/build/route_consumer" "$here/consumer/cluster.yaml")"
want="epoch 3 router v1
h1 ocs ocs0 10.20.0.1 -> ocs0 10.20.1.1 50
h2 eps eps0 10.10.0.1 -> eps0 10.10.0.3 10"
echo "$got"
if [[ "$got" != "$want" ]]; then
  printf 'FAIL: expected\n%s\n' "$want" >&2
  exit 1
fi
echo "install_consumer_test: OK"
