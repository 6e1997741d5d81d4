#!/usr/bin/env bash
# The whole test suite on a fresh Debian machine: installs packages, configures,
# builds, runs ctest. Tests that need root (label netns), a GPU (gpu) or an
# RDMA device (rdma) skip with the reason when it is missing: ctest counts
# them as "Skipped" (see cmake/MixnetTest.cmake) and the reasons are listed
# at the end.
# Extra arguments go to ctest (e.g. -L cpu, -R alltoall). With one plain label
# (-L cpu, -L netns, -L quick, ...) only what that label's tests need is built
# (target mixnet_tests_<label>); otherwise everything. -L quick: the fast unit
# tests of the inner loop (tests/quick.cmake, docs/developers.md).
# MIXNET_SANITIZE=1: the same with ASan/UBSan, in build-asan.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
labels=()
args=("$@")
for ((i = 0; i < ${#args[@]}; ++i)); do
  case "${args[i]}" in
    -L | --label-regex) labels+=("${args[i + 1]:-}") ;;
    -L?*) labels+=("${args[i]#-L}") ;;
  esac
done
targets=()
if ((${#labels[@]} == 1)); then
  case "${labels[0]}" in
    cpu | netns | gpu | rdma | quick) targets=("mixnet_tests_${labels[0]}") ;;
  esac
fi
dir="$(./scripts/build.sh "${targets[@]}" | tail -n 1)"
cd "$dir"
rc=0
ctest --output-on-failure --timeout 900 "$@" || rc=$?
# Why tests were skipped, from their output: "skipped" for a ctest test that
# ctest reports as Skipped (all its cases skipped), "partly skipped" for one
# that passed with some of its cases skipped (see tests/mixnet_test_main.cc).
if [[ -f Testing/Temporary/LastTest.log ]]; then
  awk '/^[0-9]+\/[0-9]+ Test: /{name=$3}
       /^MIXNET_SKIPPED: /{sub(/^MIXNET_SKIPPED: /, ""); print "test.sh: skipped " name ": " $0}
       /^MIXNET_PARTLY_SKIPPED: /{sub(/^MIXNET_PARTLY_SKIPPED: /, "");
                                  print "test.sh: partly skipped " name ": " $0}' \
    Testing/Temporary/LastTest.log
fi
exit "$rc"
