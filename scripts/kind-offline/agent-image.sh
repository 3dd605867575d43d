#!/usr/bin/env bash
# The netslo agent image, built without a registry or a Docker engine.
#
#   agent-image.sh build      docker-archive tarball $NETSLO_IMAGE_CACHE/agent.tar (base layer cached),
#                             the same image as an OCI layout without the base layer's blob
#                             (agent-thin.tar), and the base layer alone as the image
#                             localhost/netslo-agent-base:<key> (agent-base.image.tar, kept while the
#                             key holds; the node image imports it, so a cluster's nodes import only
#                             agent-thin.tar: 4 MB instead of 276 MB to read and hash per node)
#
# The agent image has the same contents as the Dockerfile (Python 3.11, the packages the agent imports
# (netslo/agent/recipe/packages.txt) at requirements.txt's versions, mosquitto, ethtool, procps,
# iptables and iperf3 (the QoS studies: random drop on a node, the iperf3 cross-check), the
# netslo package at /opt/netslo): a Debian bookworm minbase rootfs (debootstrap from Debian's mirror)
# with a venv holding those pinned packages is one cached layer, keyed by their pins; the netslo
# package is a second, small layer rebuilt from the work tree every time.
set -euo pipefail
shopt -s inherit_errexit
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)

IMAGES=${NETSLO_IMAGE_CACHE:-/var/cache/netslo/images}
AGENT_TAG=${NETSLO_AGENT_IMAGE:-localhost/netslo-agent:$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$REPO/netslo/__init__.py")}
DEBIAN_MIRROR=${NETSLO_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITE=bookworm
RECIPE=10  # bump when the base recipe below changes
PYVER=3.11 # Debian bookworm's python3
PACK=(python3 "$HERE/image_pack.py")
AGENT_DIR=$REPO/netslo/agent/recipe
log() { printf '[agent image] %s\n' "$*" >&2; }

# requirements.txt's lines of the names in packages.txt, as the Dockerfile installs them
agent_pins() { sh "$AGENT_DIR/pins.sh" "$AGENT_DIR/packages.txt" "$REPO/requirements.txt"; }

base_key() { { agent_pins; echo "$SUITE $RECIPE"; } | sha256sum | cut -c1-16; }

CLEANUP=()
cleanup() {  # runs on every exit, also when a step fails under "set -e"
  local m d
  for m in $(awk '{print $5}' /proc/self/mountinfo | grep "^$IMAGES/rootfs-" | sort -r); do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
  done
  for d in "${CLEANUP[@]}"; do rm -rf "$d"; done
}
trap cleanup EXIT

in_root() {  # in_root ROOT CMD...: run CMD chrooted, with a clean environment
  local root=$1; shift
  chroot "$root" env -i PATH=/opt/venv/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"
}

build_base() {  # sets BASE_TAR: path of the cached base layer tar
  local key out root wheels pins
  pins=$(agent_pins)
  key=$(base_key)
  out=$IMAGES/agent-base-$key.tar
  BASE_TAR=$out
  if [[ -f $out ]]; then return; fi
  root=$IMAGES/rootfs-$key
  wheels=$IMAGES/wheels-$key
  CLEANUP+=("$root")
  rm -rf "$root"; mkdir -p "$root" "$wheels"
  # Wheels come through this machine's own pip set-up (index, proxy CA); the chroot installs offline.
  log "pip download (cp311 wheels) into $wheels"
  nice -n 19 python3 -m pip download -q --only-binary=:all: --python-version 3.11 --implementation cp \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
    --platform linux_x86_64 --platform any -d "$wheels" -r /dev/stdin <<<"$pins"
  log "debootstrap $SUITE minbase into $root (cached as $out)"
  nice -n 19 debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates,iproute2,mosquitto,ethtool,procps,iptables,iperf3 \
    "$SUITE" "$root" "$DEBIAN_MIRROR" >"$IMAGES/debootstrap-$key.log" 2>&1 \
    || { tail -n 20 "$IMAGES/debootstrap-$key.log" >&2; return 1; }
  mkdir -p "$root/tmp/wheels"
  cp "$wheels"/* "$root/tmp/wheels/"
  echo "$pins" > "$root/tmp/requirements.txt"
  mount -t proc proc "$root/proc"
  in_root "$root" python3 -m venv /opt/venv
  nice -n 19 chroot "$root" env -i PATH=/opt/venv/bin:/usr/bin:/bin HOME=/root \
    /opt/venv/bin/pip install -q --no-index --find-links /tmp/wheels --disable-pip-version-check \
    --no-compile -r /tmp/requirements.txt
  in_root "$root" python3 -c 'import numpy, pyroute2, aiohttp, scapy, cryptography, paho.mqtt.client' \
    || { log "agent base: the venv cannot import its requirements"; return 1; }
  # Bytecode that stays valid in the image: the layers' mtimes are 0 (reproducible), which makes every
  # timestamp-checked .pyc (Debian's own for the standard library) stale, and the agent runs with
  # PYTHONDONTWRITEBYTECODE: each interpreter in every pod would compile all it imports again (about
  # a second of CPU per process while a gate's pods start). Hash-checked .pyc do not look at mtimes.
  # The compiling interpreter itself writes none (-B) and rewrites every file (-f): without both, the
  # ~70 modules it imports at its own start (enum, re, functools, subprocess...: those every agent
  # process imports) got timestamp .pyc that compileall then took as up to date, stale in the image.
  find "$root/opt/venv" "$root/usr/lib/python$PYVER" -name __pycache__ -type d -prune -exec rm -rf {} +
  # Left out (never imported by the agent): pip/setuptools, test suites.
  nice -n 19 chroot "$root" env -i PATH=/usr/bin:/bin python3 -B -m compileall -q -f -j 0 \
    --invalidation-mode checked-hash -x '/(pip|setuptools|pkg_resources|_distutils_hack|tests?)/' \
    "/usr/lib/python$PYVER" "/opt/venv/lib/python$PYVER/site-packages" \
    >/dev/null 2>&1 || true    # (a few test files in the trees do not compile; they are never imported)
  [[ -f $root/opt/venv/lib/python$PYVER/site-packages/numpy/__pycache__/__init__.cpython-${PYVER/./}.pyc ]] \
    || { log "agent base: compileall wrote no bytecode for numpy"; return 1; }
  local stale
  stale=$(python3 "$HERE/image_pack.py" timestamp-pyc "$root/usr/lib/python$PYVER" "$root/opt/venv")
  [[ -z $stale ]] || { log "agent base: timestamp-checked bytecode left (stale in the image): $stale"; return 1; }
  umount "$root/proc"
  rm -rf "${root:?}"/var/cache/apt/* "${root:?}"/var/lib/apt/lists/* "${root:?}"/usr/share/doc/* \
    "${root:?}"/usr/share/man/* "${root:?}"/usr/share/locale/* "${root:?}"/tmp/* "${root:?}"/root/.cache \
    "${root:?}"/dev/* "${root:?}"/var/log/*
  : > "$root/etc/resolv.conf"
  "${PACK[@]}" layer "$root" "$out.tmp"
  mv "$out.tmp" "$out"
  rm -rf "$root"
  # Older base layers (other requirements / recipe) are dead weight in the cache now.
  local old
  for old in "$IMAGES"/agent-base-*.tar "$IMAGES"/wheels-* "$IMAGES"/debootstrap-*.log; do
    [[ $old == *"$key"* ]] || rm -rf "$old" "$old.sha256"
  done
}

build_agent() {
  local app stage
  build_base
  stage=$(mktemp -d)
  CLEANUP+=("$stage")
  mkdir -p "$stage/root/opt/netslo"
  tar -C "$REPO" -cf - --exclude=__pycache__ --exclude='*.pyc' netslo | tar -C "$stage/root/opt/netslo" -xf -
  # The package's bytecode too (hash-checked, see build_base), when this machine's python3 is the
  # image's version (else the agent compiles it at run time, as before).
  if [[ $(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])') == "$PYVER" ]]; then
    python3 -m compileall -q --invalidation-mode checked-hash -d /opt/netslo/netslo "$stage/root/opt/netslo/netslo" >/dev/null
  else
    log "python3 here is not $PYVER: the netslo package goes in without bytecode"
  fi
  app=$IMAGES/agent-app.tar
  "${PACK[@]}" layer "$stage/root" "$app"
  "${PACK[@]}" image --tag "$AGENT_TAG" --layer "$BASE_TAR" --layer "$app" \
    --env PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env PYTHONPATH=/opt/netslo --env PYTHONDONTWRITEBYTECODE=1 --env PYTHONUNBUFFERED=1 \
    --workdir /opt/netslo --entrypoint '["python", "-m", "netslo.agent"]' \
    --oci "$IMAGES/agent-thin.tar" --oci-omit "$BASE_TAR" "$IMAGES/agent.tar" > "$IMAGES/agent.tar.id"
  log "agent image $AGENT_TAG -> $IMAGES/agent.tar (without the base layer: $IMAGES/agent-thin.tar)"
  build_base_image
}

build_base_image() {  # the base layer as an image of its own, for the node image's containerd
  local key out
  key=$(base_key)
  out=$IMAGES/agent-base.image.tar
  [[ -f $out && $(cat "$out.key" 2>/dev/null) == "$key" ]] && return
  rm -f "$out.key"
  "${PACK[@]}" image --tag "localhost/netslo-agent-base:$key" --layer "$BASE_TAR" "$out" > /dev/null
  echo "$key" > "$out.key"
}

mkdir -p "$IMAGES"
case ${1:-} in
  build) build_agent ;;
  *) echo "usage: agent-image.sh build" >&2; exit 2 ;;
esac
