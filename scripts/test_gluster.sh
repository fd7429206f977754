#!/usr/bin/env bash
# The GlusterFS test: scripts/gluster.sh starts a distribute and a replica 2 volume on this machine
# (loop-device XFS bricks, FUSE mounts), then
#   1. ckptio on the replica volume: the writer, publish/retention, reader and SIGKILL crash tests
#      of ckptio_test run with their temporary folders on the FUSE mount (crash-consistent publish
#      is rename + directory fsync there; O_DIRECT alignment comes from statx or the 4096 fallback);
#   2. a short checkpoint save + load (read and verify every checksum) and its write amplification
#      at the bricks' block devices: `grist bench ckpt --target` on the replica volume must report
#      about 2 (each brick a full copy), on the distribute volume about 1;
#   3. a small release built onto the distribute volume, `grist verify` of it there, and the
#      loader's start-up on it with the metadata caches off and on (`grist bench fs --target`);
# and tears everything down. The teardown runs on every exit (trap), and the test then checks that
# no mount, glusterd or loop device of the test bed is left. Bounded: each step has a timeout, the
# whole about two minutes. Skipped, with the reason, without root or FUSE.
# Environment: GRIST_BUILD_DIR (default build).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD=${GRIST_BUILD_DIR:-build}
GRIST="$ROOT/$BUILD/grist"
fail() { echo "test_gluster: FAILED: $*" >&2; exit 1; }

set +e
why=$(scripts/gluster.sh start 2>&1)
rc=$?
set -e
if [[ $rc -eq 77 ]]; then
  echo "test_gluster: SKIPPED: ${why#gluster: SKIPPED: }"
  exit 0
fi

tmp=$(mktemp -d /tmp/grist-gluster-test.XXXXXX)
cleanup() {
  local status=$?
  trap - EXIT
  scripts/gluster.sh stop || status=1
  # Nothing of the test bed may survive, whatever happened above.
  if grep -q ' /mnt/grist-gluster/\| /var/lib/grist-gluster/' /proc/self/mounts; then
    echo "test_gluster: FAILED: mounts left behind:" >&2
    grep ' /mnt/grist-gluster/\| /var/lib/grist-gluster/' /proc/self/mounts >&2
    status=1
  fi
  if losetup -a | grep -q grist-gluster; then
    echo "test_gluster: FAILED: loop devices left behind: $(losetup -a | grep grist-gluster)" >&2
    status=1
  fi
  if [[ -s /var/lib/grist-gluster/glusterd.pid ]] && kill -0 "$(cat /var/lib/grist-gluster/glusterd.pid)" 2>/dev/null; then
    echo "test_gluster: FAILED: glusterd left running" >&2
    status=1
  fi
  rm -rf "$tmp"
  exit $status
}
trap cleanup EXIT
[[ $rc -eq 0 ]] || fail "scripts/gluster.sh start: $why"
echo "$why"
eval "$(scripts/gluster.sh env)"
DIST=$GRIST_GLUSTER_DIST
REP2=$GRIST_GLUSTER_REP2
[[ -x "$GRIST" ]] || fail "$GRIST is not built"

# The median of figure NAME (exact) in a bench JSON file: ours or peer.
figure() {  # file name ours|peer
  /usr/bin/python3 - "$@" <<'PY'
import json, sys
rep = json.load(open(sys.argv[1]))
for f in rep["figures"]:
    if f["name"] == sys.argv[2]:
        side = f[sys.argv[3]]
        print(side["median"] if side else "nan")
        sys.exit(0)
sys.exit("no figure named %r in %s" % (sys.argv[2], sys.argv[1]))
PY
}
between() {  # value lo hi what
  /usr/bin/python3 -c "import sys; v=float(sys.argv[1]); sys.exit(0 if float(sys.argv[2]) <= v <= float(sys.argv[3]) else 1)" "$1" "$2" "$3" ||
    fail "$4 is $1, expected in [$2, $3]"
  echo "ok: $4 = $1"
}

echo "== 1. ckptio on the replica 2 volume (writer, publish, retention, reader, SIGKILL crash test)"
mkdir -p "$REP2/ckptio"
TMPDIR="$REP2/ckptio" timeout 120 "$BUILD/tests/ckptio/ckptio_test" \
  --gtest_filter='Writer.*:Checkpoint.*:Reader.*:CrashConsistency.*:InPlace*' --gtest_brief=1 ||
  fail "ckptio_test on $REP2"

echo "== 2. checkpoint save + load and write amplification at the bricks' devices"
for vol in rep2 dist; do
  dir=$REP2
  [[ $vol == dist ]] && dir=$DIST
  timeout 120 "$GRIST" bench ckpt --target "$dir" --dir "$tmp" --size 32M --repetitions 1 --warmup 0 \
    --quiet --output "$tmp/ckpt-$vol" >"$tmp/ckpt-$vol.txt" || { cat "$tmp/ckpt-$vol.txt"; fail "bench ckpt on $dir"; }
  json="$tmp/ckpt-$vol/ckpt-0.json"
  for how in "direct sync" "buffered async"; do
    gbps=$(figure "$json" "checkpoint read + verify, $how" ours)
    between "$gbps" 0.0001 1000 "$vol checkpoint read + verify GB/s ($how)"
    wa=$(figure "$json" "write amplification at the devices, $how" ours)
    if [[ $vol == rep2 ]]; then between "$wa" 1.9 3.0 "replica 2 write amplification ($how)"
    else between "$wa" 0.95 1.6 "distribute write amplification ($how)"; fi
  done
done

echo "== 3. a release on the distribute volume: build, verify, loader start-up (metadata cache off, on)"
# shellcheck disable=SC1091
source scripts/slurm/pipeline_test_config.sh
mkdir -p "$tmp/cfg"
grist_slurm_test_config "$tmp/cfg/release.toml"
timeout 120 "$GRIST" build --config "$tmp/cfg/release.toml" --output "$DIST/release" --threads 2 \
  >"$tmp/build.txt" 2>&1 || { tail -20 "$tmp/build.txt"; fail "grist build onto $DIST"; }
timeout 60 "$GRIST" verify "$DIST/release" >/dev/null || fail "grist verify $DIST/release"
timeout 120 "$GRIST" bench fs --target "$DIST" --dir "$tmp" --quick --size-mib 8 --files 200 \
  --release "$DIST/release" --repetitions 1 --warmup 0 --quiet --output "$tmp/fs" >"$tmp/fs.txt" ||
  { cat "$tmp/fs.txt"; fail "bench fs on $DIST"; }
for c in off on; do
  s=$(figure "$tmp/fs/fs-0.json" "loader start-up: Open + first batch (metadata cache $c)" ours)
  between "$s" 0 30 "loader start-up on $DIST, metadata cache $c (s)"
  r=$(figure "$tmp/fs/fs-0.json" "stat (metadata cache $c)" ours)
  between "$r" 1 1e9 "stat rate on $DIST, metadata cache $c (ops/s)"
done
[[ "$(gluster --mode=script volume get grist-dist performance.stat-prefetch | awk '$1=="performance.stat-prefetch"{print $2}')" == on ]] ||
  fail "bench fs did not restore performance.stat-prefetch"
echo "test_gluster: all passed"
