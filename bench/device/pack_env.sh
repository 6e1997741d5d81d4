# Sourced by kernels.sh and nccl_plugin.sh when MIXNET_DEVICE_PACK names a pack
# made by pack.sh: points the loader at the pack's libraries and checks, before
# anything runs, that every program named finds all of its libraries, so that a
# missing one is reported by name instead of as a test failure.
# Usage: pack_env <pack> <program>...; returns 1 (after logging) when a library
# stays missing. Needs the caller's log().
pack_env() {
  local pack=$1 p missing
  shift
  [[ -f $pack/MANIFEST ]] || { log "MIXNET_DEVICE_PACK=$pack is not a pack (no MANIFEST; make one with bench/device/pack.sh)"; return 1; }
  log "using the prebuilt pack $pack: $(head -1 "$pack/MANIFEST")"
  export LD_LIBRARY_PATH="$pack/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # The node's own libstdc++/libgcc_s are usually newer than the build host's, and
  # CUDA's and NCCL's libraries may need them: the pack's copies are used only
  # when the node has none.
  for p in "$@"; do
    if ldd "$pack/build/$p" 2>/dev/null | grep -qE '^\s*lib(stdc\+\+|gcc_s)\.so.* not found'; then
      log "no libstdc++/libgcc_s on this node: using the pack's"
      export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$pack/lib-fallback"
      break
    fi
  done
  for p in "$@"; do
    missing=$(ldd "$pack/build/$p" 2>&1 | grep "not found" || true)
    if [[ -n $missing ]]; then
      log "$p: libraries not found: $(echo "$missing" | awk '{print $1}' | tr '\n' ' ')"
      return 1
    fi
  done
}
