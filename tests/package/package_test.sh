#!/usr/bin/env bash
# Builds the Debian packages with CPack from an already built tree, unpacks them into a scratch
# root (dpkg -x) and checks what a real machine would get: the layout, the control fields and
# maintainer scripts, the conffiles, the systemd units, and that the installed programs run.
#
#   tests/package/package_test.sh BUILD_DIR SOURCE_DIR VERSION
#
# Everything it writes is under one mktemp directory (removed at exit): no .deb lands in the
# source or build tree, and it shares nothing with other tests. Registered as ctest
# package_deb_test (label package).
set -euo pipefail

build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
version=$3

scratch=$(mktemp -d "${TMPDIR:-/tmp}/sf-package-test.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
check_file() { [ -f "$root$1" ] || fail "$2: $1 is missing"; }

for tool in cpack dpkg dpkg-deb dpkg-shlibdeps; do
  command -v "$tool" >/dev/null || { echo "package_test: $tool not found (dpkg-dev, cmake)" >&2; exit 1; }
done

# 1. The packages, exactly as `cmake --build build --target package` makes them, but written to
#    the scratch directory.
if ! cpack --config "$build/CPackConfig.cmake" -G DEB -B "$scratch/out" >"$scratch/cpack.log" 2>&1; then
  cat "$scratch/cpack.log" >&2
  fail "cpack failed"
  exit 1
fi
root=$scratch/root
mkdir -p "$root"
for pkg in steadfast-master steadfast-agent steadfast-cli; do
  deb=$scratch/out/${pkg}_${version}_$(dpkg --print-architecture).deb
  if [ ! -f "$deb" ]; then
    fail "$pkg: $deb was not made (made: $(cd "$scratch/out" && ls ./*.deb 2>/dev/null | tr '\n' ' '))"
    continue
  fi
  info=$(dpkg-deb -I "$deb")
  field() { dpkg-deb -f "$deb" "$1"; }
  [ "$(field Package)" = "$pkg" ] || fail "$pkg: Package is '$(field Package)'"
  [ "$(field Version)" = "$version" ] || fail "$pkg: Version is '$(field Version)', not the project's $version"
  [ -n "$(field Maintainer)" ] || fail "$pkg: no Maintainer"
  [ -n "$(field Description)" ] || fail "$pkg: no Description"
  # dpkg-shlibdeps computed the runtime dependencies (every binary needs libc6 and libstdc++6).
  case "$(field Depends)" in
    *libc6*libstdc++6*) ;;
    *) fail "$pkg: Depends '$(field Depends)' lacks the shared library dependencies" ;;
  esac
  echo "== $pkg: $(field Depends | tr -d '\n')"
  dpkg-deb -c "$deb" | awk '{print "   " $1, $2, $6}'

  # Maintainer scripts and conffiles.
  mkdir -p "$scratch/control/$pkg"
  dpkg-deb -e "$deb" "$scratch/control/$pkg"
  if [ "$pkg" != steadfast-cli ]; then
    for script in postinst prerm postrm; do
      f=$scratch/control/$pkg/$script
      if [ ! -x "$f" ]; then
        fail "$pkg: maintainer script $script missing or not executable"
      elif ! sh -n "$f"; then
        fail "$pkg: $script is not valid sh"
      fi
    done
    grep -q 'adduser --system --group --home /var/lib/steadfast' "$scratch/control/$pkg/postinst" ||
      fail "$pkg: postinst does not create the steadfast system user"
    grep -q '\[ -d /run/systemd/system \]' "$scratch/control/$pkg/postinst" ||
      fail "$pkg: postinst does not guard systemctl with [ -d /run/systemd/system ]"
  fi
  grep -q "conffiles" <<<"$info" || [ "$pkg" = steadfast-cli ] || fail "$pkg: no conffiles"
  dpkg -x "$deb" "$root"
done

conffiles() { cat "$scratch/control/$1/conffiles" 2>/dev/null || true; }
grep -qx /etc/steadfast/master.yaml <<<"$(conffiles steadfast-master)" ||
  fail "steadfast-master: /etc/steadfast/master.yaml is not a conffile"
grep -qx /etc/steadfast/agent.env <<<"$(conffiles steadfast-agent)" ||
  fail "steadfast-agent: /etc/steadfast/agent.env is not a conffile"
dpkg-deb -f "$scratch/out/steadfast-master_${version}_$(dpkg --print-architecture).deb" Recommends 2>/dev/null |
  grep -q postgresql || fail "steadfast-master: does not recommend postgresql"

# 2. The layout.
for f in /usr/bin/sf-master /usr/bin/sf-agent /usr/bin/sf-trainer /usr/bin/sf-spm /usr/bin/sf-serve /usr/bin/sf-task /usr/bin/sf; do
  [ -x "$root$f" ] || fail "layout: $f missing or not executable"
done
check_file /lib/systemd/system/steadfast-master.service unit
check_file /lib/systemd/system/steadfast-agent.service unit
check_file /etc/steadfast/master.yaml config
check_file /etc/steadfast/agent.env config
check_file /usr/share/steadfast/local-slurm.sh cli
for sql in "$src"/master/db/migrations/*.sql; do
  check_file "/usr/share/steadfast/migrations/$(basename "$sql")" migrations
done
# The dashboard is packaged when it was built (webui/dist; CI builds it before ctest).
if [ -f "$src/webui/dist/index.html" ]; then
  check_file /usr/share/steadfast/webui/index.html webui
else
  echo "note: webui/dist not built; the package has no dashboard"
fi

# 3. The units: the dedicated user, the hardening, the paths the packages install.
unit_has() {
  grep -qx -- "$2" "$root/lib/systemd/system/$1" || fail "$1: no line '$2'"
}
for unit in steadfast-master.service steadfast-agent.service; do
  unit_has $unit "User=steadfast"
  unit_has $unit "NoNewPrivileges=yes"
  unit_has $unit "ProtectSystem=strict"
  unit_has $unit "PrivateTmp=yes"
  grep -q '^ReadWritePaths=.*/var/lib/steadfast' "$root/lib/systemd/system/$unit" ||
    fail "$unit: /var/lib/steadfast is not writable"
done
unit_has steadfast-master.service "ExecStart=/usr/bin/sf-master --config /etc/steadfast/master.yaml"
unit_has steadfast-agent.service "EnvironmentFile=-/etc/steadfast/agent.env"
# systemd's own check, on copies that point at the unpacked binaries (warnings fail the test).
if command -v systemd-analyze >/dev/null; then
  for unit in steadfast-master.service steadfast-agent.service; do
    sed "s#/usr/bin/#$root/usr/bin/#g" "$root/lib/systemd/system/$unit" >"$scratch/$unit"
  done
  out=$(cd "$scratch" && timeout 60 systemd-analyze verify --man=no \
          "$scratch/steadfast-master.service" "$scratch/steadfast-agent.service" 2>&1) ||
    fail "systemd-analyze verify failed: $out"
  [ -z "$out" ] || fail "systemd-analyze verify: $out"
fi

# 4. The installed programs run from the scratch root.
for cmd in sf-master sf-agent sf sf-trainer sf-serve; do
  if ! out=$("$root/usr/bin/$cmd" --help 2>&1); then
    fail "$cmd --help exited $?: $out"
  fi
done
# The trainer finds its SentencePiece helper beside itself.
"$root/usr/bin/sf-spm" --help >/dev/null 2>&1 || fail "sf-spm --help failed"
# User trials import the agent's `steadfast` package (docs/core-api.md): there, with its
# generated stubs, importable by Debian's python3, and where sf-agent looks (../lib beside it).
check_file /usr/lib/steadfast/python/steadfast/__init__.py python
check_file /usr/lib/steadfast/python/steadfast/v1/trial_link_pb2_grpc.py python
if ! out=$(PYTHONPATH="$root/usr/lib/steadfast/python" /usr/bin/python3 -c \
             'import steadfast, steadfast.core, steadfast.v1.trial_link_pb2_grpc; print(steadfast.__version__)' 2>&1); then
  fail "the packaged steadfast package does not import: $out"
fi
dpkg-deb -f "$scratch/out/steadfast-agent_${version}_$(dpkg --print-architecture).deb" Depends |
  grep -q python3-grpcio || fail "steadfast-agent: does not depend on python3-grpcio"
# Notebooks and shells run with Debian's Jupyter and Tornado (docs/tasks.md): recommended.
dpkg-deb -f "$scratch/out/steadfast-agent_${version}_$(dpkg --print-architecture).deb" Recommends |
  grep -q python3-notebook || fail "steadfast-agent: does not recommend python3-notebook"
if ! out=$(PYTHONPATH="$root/usr/lib/steadfast/python" /usr/bin/python3 -c \
             'import steadfast.notebook, steadfast.shell' 2>&1); then
  fail "the packaged notebook and shell launchers do not import: $out"
fi

# 5. The example configuration is what the programs accept.
# master.yaml: every key it sets is a flag of this sf-master, and sf-master parses the file
# (exit 2 is a configuration error; with no database it then waits, or gives up with exit 1).
master_help=$("$root/usr/bin/sf-master" --help)
while IFS= read -r key; do
  grep -q -- "--${key//_/-}\b" <<<"$master_help" || fail "master.yaml: '$key' is not a setting of sf-master"
done < <(grep -E '^[a-z_]+:' "$root/etc/steadfast/master.yaml" | cut -d: -f1)
grep -qx 'webui_dir: /usr/share/steadfast/webui' "$root/etc/steadfast/master.yaml" ||
  fail "master.yaml: webui_dir is not /usr/share/steadfast/webui"
grep -qx 'bind: 127.0.0.1' "$root/etc/steadfast/master.yaml" || fail "master.yaml: does not bind loopback"
grep -qx 'agent_join_token_file: /etc/steadfast/join-token' "$root/etc/steadfast/master.yaml" ||
  fail "master.yaml: agent_join_token_file is not /etc/steadfast/join-token"
grep -q '^# *tls_cert_file:' "$root/etc/steadfast/master.yaml" || fail "master.yaml: no tls_cert_file comment"
set +e
out=$(timeout -s KILL 5 "$root/usr/bin/sf-master" --config "$root/etc/steadfast/master.yaml" \
        --db "host=$scratch/no-postgres dbname=none connect_timeout=1" --grpc-port 0 --http-port 0 \
        --agent-join-token-file "$scratch/none" 2>&1)
rc=$?
set -e
[ "$rc" -ne 2 ] || fail "sf-master rejects the packaged master.yaml: $out"
# The agent unit's flags exist in this sf-agent.
agent_help=$("$root/usr/bin/sf-agent" --help)
for flag in --join-token-file --pool --slots --work-dir; do
  grep -q -- "$flag\b" <<<"$agent_help" || fail "steadfast-agent.service passes $flag, which sf-agent lacks"
done

if [ "$failures" -gt 0 ]; then
  echo "package_test: $failures check(s) failed" >&2
  exit 1
fi
echo "package_test: OK (packages, layout, units, --help, configs)"
