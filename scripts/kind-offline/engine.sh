# shellcheck shell=bash
# The private docker engine of the offline kind toolchain (sourced by scripts/kind-offline.sh).
#
# Debian's docker.io 20.10 / containerd 1.6 / runc 1.1 / tini, fetched with "apt-get download" and
# unpacked with "dpkg -x" under $KO_ENGINE: nothing is installed system-wide. dockerd runs in the host's
# network namespace with its own data-root, exec-root, socket and cgroup parent, and is told to leave the
# host's network configuration alone:
#   --iptables=false --ip-forward=false --ip-masq=false --bridge=none
# Left to itself dockerd 20.10 sets the FORWARD policy to DROP, adds its chains/NAT rules and sets
# net.ipv4.ip_forward=1, which would change the network under the netns gate running beside it. kind
# needs none of that here: its nodes share one bridge (L2, no routing on the host), the apiserver's port
# is published on 127.0.0.1 by docker-proxy (userland, no DNAT), and the embedded DNS that resolves node
# names lives in each container's own namespace. The host's ruleset, FORWARD policy, ip_forward and
# bridge-nf sysctls are checked unchanged by tests/integration/test_kind_offline.py.

engine_root() { echo "$KO_ENGINE/root"; }

engine_fetch() {  # unpack the Debian packages once
  [[ -x $KO_ENGINE/root/usr/sbin/dockerd && -f $KO_ENGINE/.done ]] && return
  ko_log "engine: apt-get download ${ENGINE_DEBS[*]} -> $KO_ENGINE"
  rm -rf "$KO_ENGINE"; mkdir -p "$KO_ENGINE/debs" "$KO_ENGINE/root" "$KO_ENGINE/bin"
  (cd "$KO_ENGINE/debs" && apt-get download "${ENGINE_DEBS[@]}" >/dev/null 2>"$KO_ENGINE/apt.log") || {
    ko_log "apt-get download failed; running apt-get update once"
    apt-get update -qq >/dev/null
    (cd "$KO_ENGINE/debs" && apt-get download "${ENGINE_DEBS[@]}" >/dev/null)
  }
  local d
  for d in "$KO_ENGINE"/debs/*.deb; do dpkg -x "$d" "$KO_ENGINE/root"; done
  install -m 0755 "$KO_HERE/runc-wrapper" "$KO_ENGINE/bin/netslo-runc"
  # dockerd finds containerd, containerd-shim-runc-v2, runc and docker-init on PATH.
  ( cd "$KO_ENGINE/bin" && for d in containerd containerd-shim-runc-v2 ctr; do ln -sf ../root/usr/bin/$d .; done
    ln -sf ../root/usr/sbin/docker-proxy . ; ln -sf ../root/usr/bin/docker-init . ; ln -sf ../root/usr/sbin/runc runc )
  "$KO_ENGINE/root/usr/sbin/dockerd" --version >&2
  dpkg-deb -f "$KO_ENGINE"/debs/docker.io_*.deb Version > "$KO_ENGINE/version"
  touch "$KO_ENGINE/.done"
}

engine_client_link() {  # the engine's own docker client (Debian's docker.io, the daemon's version) in $KO_BIN
  mkdir -p "$KO_BIN"
  ln -sf ../engine/root/usr/bin/docker "$KO_BIN/docker"
  "$KO_BIN/docker" --version >/dev/null || ko_die "engine: $KO_BIN/docker (from docker.io) does not run"
}

engine_pid() { local p; p=$(cat "$KO_STATE/dockerd.pid" 2>/dev/null) || return 1; kill -0 "$p" 2>/dev/null && echo "$p"; }
engine_alive() { engine_pid >/dev/null && docker version >/dev/null 2>&1; }

engine_start() {
  if engine_alive; then ko_log "engine: already running (pid $(engine_pid))"; return; fi
  engine_fetch
  mkdir -p "$KO_STATE/exec" "$KO_STATE/logs" "$KO_DATA"
  echo '{}' > "$KO_STATE/daemon.json"   # never the host's /etc/docker/daemon.json
  ko_log "engine: starting dockerd (socket $KO_SOCK, data-root $KO_DATA)"
  # dockerd outlives this script: it must not inherit our open files (e.g. a caller's flock on
  # /tmp/netslo-heavy.lock, which it would then hold for as long as it runs).
  ( for fd in /proc/$BASHPID/fd/*; do fd=${fd##*/}; ((fd > 2)) && eval "exec $fd>&-"; done
    PATH=$KO_ENGINE/bin:$PATH exec setsid "$KO_ENGINE/root/usr/sbin/dockerd" \
    --config-file "$KO_STATE/daemon.json" \
    --data-root "$KO_DATA" --exec-root "$KO_STATE/exec" --pidfile "$KO_STATE/dockerd.pid" \
    -H "unix://$KO_SOCK" --storage-driver overlay2 \
    --add-runtime "netslo-runc=$KO_ENGINE/bin/netslo-runc" --default-runtime netslo-runc \
    --iptables=false --ip-forward=false --ip-masq=false --bridge=none \
    --userland-proxy-path "$KO_ENGINE/root/usr/sbin/docker-proxy" \
    --init-path "$KO_ENGINE/root/usr/bin/docker-init" \
    --exec-opt native.cgroupdriver=cgroupfs --cgroup-parent "/$KO_CGROUP_PARENT" \
    --log-driver json-file --log-opt max-size=10m \
    >"$KO_STATE/logs/dockerd.log" 2>&1 </dev/null ) &
  local i
  for i in $(seq 150); do
    docker version >/dev/null 2>&1 && break
    sleep 0.2
    [[ $i == 150 ]] && { tail -n 20 "$KO_STATE/logs/dockerd.log" >&2; ko_die "engine: dockerd did not answer in 30 s"; }
  done
  engine_network
  ko_log "engine: dockerd $(docker version -f '{{.Server.Version}}') up (pid $(engine_pid))"
}

engine_network() {  # kind's network, made by us so its subnet and bridge name are known
  docker network inspect "$KO_NET_NAME" >/dev/null 2>&1 && return
  docker network create -d bridge --subnet "$KO_NET_SUBNET" --gateway "$KO_NET_GATEWAY" \
    --ipv6 --subnet "$KO_NET_SUBNET6" --gateway "$KO_NET_GATEWAY6" \
    -o "com.docker.network.bridge.name=$KO_NET_BRIDGE" \
    -o com.docker.network.bridge.enable_ip_masquerade=false \
    -o com.docker.network.driver.mtu=1500 "$KO_NET_NAME" >/dev/null
}

# Processes of the engine: dockerd and everything started from the unpacked binaries (containerd,
# shims, docker-proxy); found by executable path, never by name.
engine_procs() {
  local p exe
  for p in /proc/[0-9]*; do
    exe=$(readlink "$p/exe" 2>/dev/null) || continue
    if [[ $exe == "$KO_ENGINE/root/"* ]]; then echo "${p#/proc/}"; fi
  done
  return 0
}

engine_stop() {
  local pid i
  if pid=$(engine_pid); then
    ko_log "engine: stopping dockerd (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  # containerd-shims outlive dockerd when containers were still running: end ours, by pid.
  for i in 1 2 3; do
    local left
    left=$(engine_procs)
    [[ -z $left ]] && break
    # shellcheck disable=SC2086
    kill -TERM $left 2>/dev/null || true; sleep 1
    [[ $i == 3 ]] && { kill -KILL $left 2>/dev/null || true; }
  done
  engine_unmount
  # cgroups: /sys/fs/cgroup/<controller>/netslo-kind/... (cgroup v1; empty once the processes are gone)
  local c
  for c in /sys/fs/cgroup/*/"$KO_CGROUP_PARENT" /sys/fs/cgroup/"$KO_CGROUP_PARENT"; do
    if [[ -d $c ]]; then find "$c" -depth -type d -exec rmdir {} + 2>/dev/null || true; fi
  done
  ip link del "$KO_NET_BRIDGE" 2>/dev/null || true
  rm -rf "$KO_STATE"
}

engine_unmount() {  # whatever is still mounted under the engine's roots (overlays, netns, shm)
  local m
  for m in $(awk '{print $5}' /proc/self/mountinfo | grep -E "^($KO_STATE|$KO_DATA)(/|$)" | sort -r); do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
  done
}
