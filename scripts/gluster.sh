#!/usr/bin/env bash
# A GlusterFS test bed on this one machine, for the week-13 labs and CI (scripts/test_gluster.sh):
#
#   scripts/gluster.sh start    glusterd; four bricks, each an XFS file system on its own loop
#                               device (a sparse image on the local disk), so that the bytes the
#                               bricks write can be counted at their block devices; two volumes,
#                                 grist-dist     distribute over bricks 0 and 1
#                                 grist-rep2     replica 2 over bricks 2 and 3 (force: one host)
#                               both mounted with FUSE (mount -t glusterfs) under $MNT.
#   scripts/gluster.sh stop     unmounts, stops and deletes the volumes, stops glusterd and the
#                               brick and self-heal daemons it started, detaches the loop devices
#                               and removes the images. Leaves nothing behind; safe to repeat.
#   scripts/gluster.sh status   what is up (exit 0 when both volumes are mounted, else 1).
#   scripts/gluster.sh env      prints shell assignments: GRIST_GLUSTER_DIST, GRIST_GLUSTER_REP2
#                               (the mount points) and GRIST_GLUSTER_DEVICES_* (the loop devices).
# GlusterFS's metadata caches are switched off and on by `grist bench fs --target DIR
# --metadata-cache off,on` itself (bench/target_fs.h names the options).
#
# Idempotent (start when up, stop when down: no-ops). Needs root and /dev/fuse; without them
# `start` prints "gluster: SKIPPED: <reason>" and exits 77 (the test-suite convention for a skip).
# Installs glusterfs-server and glusterfs-client (Debian's packages) through scripts/setup.sh when
# missing. Environment: GRIST_GLUSTER_STATE (default /var/lib/grist-gluster: images, pid files),
# GRIST_GLUSTER_MNT (default /mnt/grist-gluster), GRIST_GLUSTER_BRICK_GIB (sparse image size,
# default 4).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
STATE=${GRIST_GLUSTER_STATE:-/var/lib/grist-gluster}
MNT=${GRIST_GLUSTER_MNT:-/mnt/grist-gluster}
BRICK_GIB=${GRIST_GLUSTER_BRICK_GIB:-4}
VOL_DIST=grist-dist
VOL_REP2=grist-rep2
NBRICKS=4

log() { echo "gluster: $*" >&2; }
die() { echo "gluster: ERROR: $*" >&2; exit 1; }
skip() { echo "gluster: SKIPPED: $*"; exit 77; }
cli() { timeout 60 gluster --mode=script "$@"; }

# The reason this machine cannot run the test bed, or nothing.
why_not() {
  if [[ $(id -u) -ne 0 ]]; then echo "needs root (glusterd, loop devices, FUSE mounts)"; return; fi
  if [[ ! -c /dev/fuse ]]; then echo "/dev/fuse is absent (no FUSE in this kernel or container)"; return; fi
  if ! grep -qw fuse /proc/filesystems 2>/dev/null && ! modprobe fuse 2>/dev/null; then
    echo "the kernel has no fuse file system"; return
  fi
  if ! command -v losetup >/dev/null || [[ ! -e /dev/loop-control ]]; then
    echo "no loop devices (losetup or /dev/loop-control missing)"; return
  fi
}

# The address bricks are named by: glusterd refuses localhost/127.0.0.1 for bricks.
host_addr() {
  local a
  a=$(hostname -I 2>/dev/null | tr ' ' '\n' | grep -E '^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$' |
      grep -v '^127\.' | head -n1 || true)
  [[ -n "$a" ]] || die "no non-loopback IPv4 address for the bricks (hostname -I is empty)"
  echo "$a"
}

install_packages() {
  if command -v glusterd >/dev/null && command -v gluster >/dev/null && \
     [[ -x /sbin/mount.glusterfs || -x /usr/sbin/mount.glusterfs ]]; then
    return
  fi
  log "installing glusterfs-server glusterfs-client (and xfsprogs)"
  GRIST_SKIP_VENV=1 GRIST_EXTRA_PACKAGES="glusterfs-server glusterfs-client xfsprogs" \
    "$ROOT/scripts/setup.sh" >&2
}

alive() { [[ -n "${1:-}" ]] && kill -0 "$1" 2>/dev/null; }
pidof_file() { [[ -s "$1" ]] && cat "$1" || true; }

start_glusterd() {
  local pid
  pid=$(pidof_file "$STATE/glusterd.pid")
  if alive "$pid"; then return; fi
  mkdir -p /var/log/glusterfs /run/gluster
  glusterd --pid-file="$STATE/glusterd.pid" --log-file="$STATE/glusterd.log"
  for _ in $(seq 1 100); do
    if cli volume list >/dev/null 2>&1; then return; fi
    sleep 0.2
  done
  die "glusterd did not answer within 20 s (log: $STATE/glusterd.log)"
}

# Loop device of brick i ("" when not attached).
brick_loop() {
  losetup -j "$STATE/img/brick$1.img" -O NAME -n 2>/dev/null | head -n1 | tr -d ' '
}

make_bricks() {
  mkdir -p "$STATE/img" "$STATE/bricks"
  local i img dev m
  for i in $(seq 0 $((NBRICKS - 1))); do
    img="$STATE/img/brick$i.img"
    m="$STATE/bricks/b$i"
    [[ -f "$img" ]] || truncate -s "${BRICK_GIB}G" "$img"
    dev=$(brick_loop "$i")
    if [[ -z "$dev" ]]; then
      dev=$(losetup -f --show "$img")
      echo "$dev" >"$STATE/loop$i"
    fi
    if ! blkid -o value -s TYPE "$dev" 2>/dev/null | grep -q xfs; then
      # 512-byte inodes keep gluster's xattrs (gfid, afr changelog) inside the inode.
      mkfs.xfs -q -f -i size=512 "$dev"
    fi
    mkdir -p "$m"
    mountpoint -q "$m" || mount -o noatime "$dev" "$m"
    mkdir -p "$m/brick"
  done
}

create_volume() {  # name, then create arguments
  local name=$1
  shift
  if ! cli volume info "$name" >/dev/null 2>&1; then
    cli volume create "$name" "$@" force >/dev/null
  fi
  if ! cli volume info "$name" | grep -q '^Status: Started'; then
    cli volume start "$name" force >/dev/null
  fi
}

mount_volume() {  # volume, mount point
  local vol=$1 at=$2 addr=$3
  mkdir -p "$at"
  if mountpoint -q "$at"; then return; fi
  for _ in $(seq 1 30); do
    if mount -t glusterfs -o log-file="$STATE/mount-$vol.log" "$addr:/$vol" "$at" 2>/dev/null &&
       mountpoint -q "$at" && stat -f "$at" >/dev/null 2>&1; then
      return
    fi
    umount "$at" 2>/dev/null || true
    sleep 0.5  # bricks still coming up
  done
  die "mounting $addr:/$vol on $at failed (log: $STATE/mount-$vol.log)"
}

cmd_start() {
  local why
  why=$(why_not)
  [[ -z "$why" ]] || skip "$why"
  install_packages
  mkdir -p "$STATE"
  start_glusterd
  make_bricks
  local addr b
  addr=$(host_addr)
  b="$STATE/bricks"
  create_volume "$VOL_DIST" "$addr:$b/b0/brick" "$addr:$b/b1/brick"
  create_volume "$VOL_REP2" replica 2 "$addr:$b/b2/brick" "$addr:$b/b3/brick"
  mount_volume "$VOL_DIST" "$MNT/dist" "$addr"
  mount_volume "$VOL_REP2" "$MNT/rep2" "$addr"
  chmod 1777 "$MNT/dist" "$MNT/rep2"
  log "up: $VOL_DIST on $MNT/dist (bricks $(devs 0 1)), $VOL_REP2 on $MNT/rep2 (bricks $(devs 2 3))"
}

devs() {
  local out="" i d
  for i in "$@"; do
    d=$(brick_loop "$i")
    out+="${out:+,}$(basename "${d:-none}")"
  done
  echo "$out"
}

# Kills the daemons glusterd started for our volumes, by the pid files it wrote.
kill_pidfiles() {
  local f pid
  for f in /run/gluster/vols/"$VOL_DIST"/*.pid /run/gluster/vols/"$VOL_REP2"/*.pid \
           /var/run/gluster/vols/"$VOL_DIST"/*.pid /var/run/gluster/vols/"$VOL_REP2"/*.pid \
           /var/run/gluster/shd/"$VOL_REP2"/*.pid /run/gluster/shd/"$VOL_REP2"/*.pid \
           /var/run/gluster/glustershd/glustershd.pid /run/gluster/glustershd/glustershd.pid; do
    [[ -f "$f" ]] || continue
    pid=$(cat "$f")
    if alive "$pid"; then kill "$pid" 2>/dev/null || true; fi
  done
}

cmd_stop() {
  local at i m dev pid
  for at in "$MNT/dist" "$MNT/rep2"; do
    if mountpoint -q "$at" 2>/dev/null; then umount "$at" 2>/dev/null || umount -l "$at" || true; fi
  done
  pid=$(pidof_file "$STATE/glusterd.pid")
  if alive "$pid"; then
    for v in "$VOL_DIST" "$VOL_REP2"; do
      if cli volume info "$v" >/dev/null 2>&1; then
        cli volume stop "$v" force >/dev/null 2>&1 || true
        cli volume delete "$v" >/dev/null 2>&1 || true
      fi
    done
  fi
  kill_pidfiles
  if alive "$pid"; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do alive "$pid" || break; sleep 0.1; done
    alive "$pid" && kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$STATE/glusterd.pid"
  for i in $(seq 0 $((NBRICKS - 1))); do
    m="$STATE/bricks/b$i"
    if mountpoint -q "$m" 2>/dev/null; then
      # A brick daemon may take a moment to exit after its volume is stopped.
      for _ in $(seq 1 50); do umount "$m" 2>/dev/null && break; sleep 0.1; done
      mountpoint -q "$m" && umount -l "$m"
    fi
    while dev=$(brick_loop "$i") && [[ -n "$dev" ]]; do losetup -d "$dev" || break; done
  done
  if [[ -d "$STATE" ]]; then rm -rf "$STATE/img" "$STATE/bricks" "$STATE"/loop*; fi
  log "down"
}

cmd_status() {
  local ok=0 pid
  pid=$(pidof_file "$STATE/glusterd.pid")
  if alive "$pid"; then echo "glusterd: running (pid $pid)"; else echo "glusterd: not running"; ok=1; fi
  for at in "$MNT/dist" "$MNT/rep2"; do
    if mountpoint -q "$at" 2>/dev/null; then echo "$at: mounted ($(findmnt -n -o SOURCE "$at"))"
    else echo "$at: not mounted"; ok=1; fi
  done
  echo "bricks: dist $(devs 0 1), rep2 $(devs 2 3)"
  return $ok
}

cmd_env() {
  echo "GRIST_GLUSTER_DIST=$MNT/dist"
  echo "GRIST_GLUSTER_REP2=$MNT/rep2"
  echo "GRIST_GLUSTER_DEVICES_DIST=$(devs 0 1)"
  echo "GRIST_GLUSTER_DEVICES_REP2=$(devs 2 3)"
}

case "${1:-}" in
  start) cmd_start ;;
  stop)
    [[ $(id -u) -eq 0 ]] || skip "needs root"
    cmd_stop ;;
  status) cmd_status ;;
  env) cmd_env ;;
  *) echo "usage: scripts/gluster.sh start|stop|status|env" >&2; exit 2 ;;
esac
