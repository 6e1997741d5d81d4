#!/usr/bin/env bash
# package_test (label package): builds the Debian packages from the built
# folder (cpack, as ./scripts/package.sh; nothing is compiled), unpacks each
# with dpkg -x into a throwaway root (never dpkg -i) and checks from there:
#   - the packages of cmake/MixnetPackaging.cmake exist, files where Debian
#     wants them (/usr/bin, /usr/lib/<multiarch>, /usr/lib/python3/dist-packages,
#     /etc/mixnet as conffiles, /usr/lib/systemd/system);
#   - every Depends name is one of these packages or a real Debian package
#     (dpkg-query -W here, else apt-cache show);
#   - mixnet-ocsd, mixnet-controller and mixnetctl --help run, and dlopen of
#     libnccl-net-mixnet.so finds ncclNetPlugin_v8, both loading
#     libmixnet_proto_control.so from the root (their RUNPATH), not the build;
#   - `import mixnet` with PYTHONPATH into the root;
#   - systemd-analyze verify accepts the units without a warning (when
#     systemd-analyze exists; else that part is reported skipped);
#   - the maintainer scripts parse (sh -n);
#   - the packaged default: mixnet-ocsd on a unix socket in /run/mixnet-ocsd
#     that only its user and group may use (run from the root under the
#     unit's UMask), the controller pointed there and put in that group.
# Usage: package_test.sh BUILD_DIR
set -euo pipefail
build="$(cd "$1" && pwd)"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/mixnet-package.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
root="$tmp/root"
mkdir -p "$root"
fail() { echo "FAIL: $*" >&2; exit 1; }
skipped=()

start=$SECONDS
(cd "$build" && cpack -G DEB -B "$tmp/out" >"$tmp/cpack.log" 2>&1) ||
  { cat "$tmp/cpack.log"; fail "cpack"; }
echo "cpack: $((SECONDS - start)) s"

expected=(mixnet-common mixnet-nccl-plugin mixnet-ocsd mixnet-controller mixnet-tools)
have_python=0
if grep -q '^MIXNET_PYTHON_DIR' "$build/CMakeCache.txt"; then
  expected+=(python3-mixnet)
  have_python=1
else
  skipped+=("python3-mixnet: the Python package is not built in $build")
fi
declare -A deb_of
for deb in "$tmp"/out/*.deb; do
  deb_of["$(dpkg-deb -f "$deb" Package)"]="$deb"
done
for p in "${expected[@]}"; do
  [[ -n "${deb_of[$p]:-}" ]] || fail "no package $p in $(ls "$tmp/out")"
done
[[ ${#deb_of[@]} -eq ${#expected[@]} ]] || fail "unexpected packages: ${!deb_of[*]}"

# Depends: ours at this exact version, else a Debian package known here.
version="$(dpkg-deb -f "${deb_of[mixnet-common]}" Version)"
for p in "${expected[@]}"; do
  deb="${deb_of[$p]}"
  depends="$(dpkg-deb -f "$deb" Depends)"
  echo "$p: Depends: $depends"
  [[ -n "$depends" ]] || fail "$p has no Depends"
  # Every package holds ELF objects: dpkg-shlibdeps must have named libc6.
  grep -q 'libc6' <<<"$depends" || fail "$p: no libc6 in Depends (dpkg-shlibdeps did not run?)"
  IFS=',|' read -ra alts <<<"$depends"
  for alt in "${alts[@]}"; do
    name="$(sed -E 's/^ *([^ (]+).*/\1/' <<<"$alt")"
    if [[ " ${expected[*]} " == *" $name "* ]]; then
      [[ "$alt" == *"(= $version)"* ]] || fail "$p: $alt: our packages depend on exactly $version"
      continue
    fi
    dpkg-query -W "$name" >/dev/null 2>&1 || apt-cache show "$name" >/dev/null 2>&1 ||
      fail "$p: Depends on '$name', which is not a Debian package known here"
  done
  dpkg -x "$deb" "$root"
  # A binary that links the private library needs mixnet-common.
  dpkg -x "$deb" "$tmp/one"
  while IFS= read -r -d '' f; do
    if readelf -d "$f" 2>/dev/null | grep -q 'NEEDED.*libmixnet_proto_control' &&
        [[ "$p" != mixnet-common && "$depends" != *"mixnet-common (= $version)"* ]]; then
      fail "$p: ${f#"$tmp/one"} links libmixnet_proto_control.so but $p does not depend on mixnet-common"
    fi
  done < <(find "$tmp/one" -type f -print0)
  rm -rf "$tmp/one"
  mkdir -p "$tmp/control/$p"
  dpkg-deb -e "$deb" "$tmp/control/$p"
done

# Layout: nothing under /usr/etc or /usr/local; configuration as conffiles.
[[ ! -e "$root/usr/etc" && ! -e "$root/usr/local" ]] || fail "files under /usr/etc or /usr/local"
multiarch="$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)"
libdir="$root/usr/lib/$multiarch"
for f in usr/bin/mixnet-ocsd usr/bin/mixnet-controller usr/bin/mixnetctl usr/bin/mixnet-fabric \
    usr/lib/$multiarch/libnccl-net-mixnet.so usr/lib/$multiarch/mixnet/libmixnet_proto_control.so \
    usr/lib/systemd/system/mixnet-ocsd.service usr/lib/systemd/system/mixnet-controller.service \
    etc/mixnet/mixnet-ocsd.env etc/mixnet/mixnet-controller.env; do
  [[ -e "$root/$f" ]] || fail "/$f missing"
done
for d in ocsd controller; do
  grep -qx "/etc/mixnet/mixnet-$d.env" "$tmp/control/mixnet-$d/conffiles" ||
    fail "mixnet-$d: /etc/mixnet/mixnet-$d.env is not a conffile"
  for s in postinst prerm postrm; do
    [[ -x "$tmp/control/mixnet-$d/$s" ]] || fail "mixnet-$d: no executable $s"
    sh -n "$tmp/control/mixnet-$d/$s" || fail "mixnet-$d: $s does not parse"
  done
done

# The installed binaries, from the root; the private library from the root.
# NEEDED of each binary that links it, resolved through its RUNPATH.
private="$libdir/mixnet/libmixnet_proto_control.so"
for bin in "$root/usr/bin/"* "$libdir/libnccl-net-mixnet.so" \
    "$root"/usr/lib/python3/dist-packages/mixnet/_C*.so; do
  [[ -e "$bin" ]] || continue
  if readelf -d "$bin" | grep -q 'NEEDED.*libmixnet_proto_control'; then
    resolved="$(ldd "$bin" | awk '/libmixnet_proto_control/ {print $3}')"
    [[ "$(realpath "$resolved")" == "$(realpath "$private")" ]] ||
      fail "$bin loads libmixnet_proto_control.so from '$resolved', not the package's"
  fi
  ! readelf -d "$bin" | grep -E 'R(UN)?PATH' | grep -qF "$build" || fail "$bin: RUNPATH names $build"
  ldd "$bin" | grep -q 'not found' && fail "$bin: $(ldd "$bin" | grep 'not found')"
done
for cmd in mixnet-ocsd mixnet-controller mixnetctl; do
  out="$(env -u LD_LIBRARY_PATH "$root/usr/bin/$cmd" --help)" || fail "$cmd --help"
  grep -q -- '--listen\|Usage' <<<"$out" || fail "$cmd --help printed: $out"
  echo "$cmd --help: ok"
done

# dlopen the plugin as NCCL does (by path) and look up its v8 entry point.
python3 - "$libdir/libnccl-net-mixnet.so" "$private" <<'EOF' || fail "dlopen of the installed plugin"
import ctypes, os, sys
lib = ctypes.CDLL(sys.argv[1], mode=os.RTLD_NOW | os.RTLD_LOCAL)
for v in ("ncclNetPlugin_v8", "ncclNetPlugin_v9", "ncclNetPlugin_v10", "ncclNetPlugin_v11"):
    if not hasattr(lib, v):
        sys.exit(f"{sys.argv[1]}: no symbol {v}")
maps = open("/proc/self/maps").read()
if os.path.realpath(sys.argv[2]) not in maps:
    sys.exit("libmixnet_proto_control.so was not loaded from the package")
print("dlopen plugin: ncclNetPlugin_v8..v11 found")
EOF

if ((have_python)); then
  pydir="$root/usr/lib/python3/dist-packages"
  PYTHONPATH="$pydir" PYTHONDONTWRITEBYTECODE=1 python3 - "$pydir" "$private" <<'EOF' ||
import os, sys
import mixnet
if not os.path.realpath(mixnet.__file__).startswith(os.path.realpath(sys.argv[1])):
    sys.exit(f"mixnet imported from {mixnet.__file__}, not the package")
if os.path.realpath(sys.argv[2]) not in open("/proc/self/maps").read():
    sys.exit("mixnet._C did not load libmixnet_proto_control.so from the package")
assert not mixnet.is_initialized()
print("import mixnet: ok,", mixnet.__file__)
EOF
    fail "import mixnet from the root"
fi

# The units: systemd-analyze verify on copies whose ExecStart points into the
# root (verify checks that the command exists); any message is a failure.
if command -v systemd-analyze >/dev/null; then
  mkdir -p "$tmp/units"
  for u in "$root"/usr/lib/systemd/system/*.service; do
    sed "s#/usr/bin/#$root/usr/bin/#g" "$u" >"$tmp/units/$(basename "$u")"
  done
  out="$(systemd-analyze verify "$tmp"/units/*.service 2>&1)" || fail "systemd-analyze verify: $out"
  [[ -z "$out" ]] || fail "systemd-analyze verify: $out"
  echo "systemd-analyze verify: ok"
else
  skipped+=("systemd-analyze verify: systemd-analyze not installed")
fi

# The packaged default: mixnet-ocsd on a unix socket in its runtime
# directory, made under the unit's UMask (its user and group only), the
# controller's --ocs pointing there, and the postinst joining the
# controller's user to that group. The daemon is run from the root as the
# unit would run it, the socket moved into $tmp.
ocsd_args="$(sed -n 's/^MIXNET_OCSD_ARGS=//p' "$root/etc/mixnet/mixnet-ocsd.env")"
ctl_args="$(sed -n 's/^MIXNET_CONTROLLER_ARGS=//p' "$root/etc/mixnet/mixnet-controller.env")"
unit="$root/usr/lib/systemd/system/mixnet-ocsd.service"
sock="$(grep -oE -- '--listen unix:[^ ]+' <<<"$ocsd_args" | sed 's/^--listen unix://')" || true
[[ "$sock" == /run/mixnet-ocsd/* ]] ||
  fail "the packaged mixnet-ocsd listens as '$ocsd_args', not on a unix socket in /run/mixnet-ocsd"
grep -qx 'RuntimeDirectory=mixnet-ocsd' "$unit" || fail "mixnet-ocsd.service makes no /run/mixnet-ocsd"
grep -qF -- "--ocs ocs0=unix:$sock" <<<"$ctl_args" ||
  fail "the packaged controller's --ocs is not unix:$sock: $ctl_args"
grep -q 'adduser --quiet mixnet-controller mixnet-ocsd' "$tmp/control/mixnet-ocsd/postinst" ||
  fail "the postinst does not add user mixnet-controller to group mixnet-ocsd"
unit_umask="$(sed -n 's/^UMask=//p' "$unit")"
mkdir -p "$tmp/run" "$tmp/ocsd-state"
read -ra args <<<"${ocsd_args//"unix:$sock"/"unix:$tmp/run/ocsd.sock"}"
(umask "$unit_umask" && exec env -u LD_LIBRARY_PATH "$root/usr/bin/mixnet-ocsd" "${args[@]}" \
  --state-dir "$tmp/ocsd-state" --ready-file "$tmp/run/ready") >"$tmp/ocsd.log" 2>&1 &
ocsd_pid=$!
trap 'kill "$ocsd_pid" 2>/dev/null || true; rm -rf "$tmp"' EXIT
for _ in $(seq 100); do [[ -s "$tmp/run/ready" ]] && break; sleep 0.1; done
[[ -s "$tmp/run/ready" ]] || fail "the packaged mixnet-ocsd did not start: $(cat "$tmp/ocsd.log")"
mode="$(stat -c %a "$tmp/run/ocsd.sock")"
[[ "$mode" == 770 ]] || fail "the socket's mode is $mode under UMask=$unit_umask, not 770 (user, group)"
env -u LD_LIBRARY_PATH "$root/usr/bin/mixnetctl" ocs health --target "unix:$tmp/run/ocsd.sock" \
  >/dev/null || fail "mixnetctl ocs health on the packaged socket"
kill "$ocsd_pid"
wait "$ocsd_pid" || true
echo "packaged default: mixnet-ocsd on unix:$sock (mode $mode), the controller's --ocs there"

for s in "${skipped[@]}"; do echo "MIXNET_PARTLY_SKIPPED: $s"; done
echo "package_test: OK ($((SECONDS - start)) s)"
