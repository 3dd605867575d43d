# shellcheck shell=bash disable=SC2034  # sourced by scripts/kind-offline.sh and its helpers
# Pinned versions and paths of the offline kind toolchain.
KO_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
KO_REPO=$(cd "$KO_HERE/../.." && pwd)
# shellcheck source=scripts/kind-offline/versions.sh
. "$KO_HERE/versions.sh"

KIND_VERSION=v0.33.0                 # go install sigs.k8s.io/kind@v0.33.0; node files from the same module
KIND_MODULE=sigs.k8s.io/kind
CNI_PLUGINS_VERSION=v1.7.1           # github.com/containernetworking/plugins (node's /opt/cni/bin)
# CoreDNS: the tag kubeadm of that minor asks for (checked at build time); crictl
# (sigs.k8s.io/cri-tools, cmd/crictl): the minor of the Kubernetes build
case $KMINOR in
  34) COREDNS_VERSION=v1.12.1 CRICTL_VERSION=v1.34.0 ;;
  *)  COREDNS_VERSION=v1.14.6 CRICTL_VERSION=v1.37.0 ;;
esac
SUITE=bookworm
DEBIAN_MIRROR=${NETSLO_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# Debian's engine: dockerd 20.10, containerd 1.6, runc 1.1, tini (docker-init); unpacked, never installed.
ENGINE_DEBS=(docker.io containerd runc tini)

KO_CACHE=${NETSLO_KIND_CACHE:-/var/cache/netslo/kind-offline}
KO_ENGINE=$KO_CACHE/engine             # unpacked .debs (root/) and the runc wrapper (bin/)
KO_BIN=$KO_CACHE/bin                   # kind, kubectl (symlink to the k8s build)
KO_IMAGES=$KO_CACHE/images             # docker-archive tarballs of the component images
KO_AGENT_CACHE=${NETSLO_IMAGE_CACHE:-/var/cache/netslo/images}   # the agent image's (agent-image.sh)
KO_DATA=$KO_CACHE/docker               # the engine's data-root: loaded images survive down/up
KO_STATE=${NETSLO_KIND_STATE:-/run/netslo-kind}   # exec-root, socket, pid, logs: removed by down
KO_SOCK=$KO_STATE/docker.sock
KO_CGROUP_PARENT=netslo-kind           # every container's cgroup is under /sys/fs/cgroup/*/netslo-kind
# The engine's own bridge network for kind's nodes, in the benchmarking range (RFC 2544), never
# routed off this machine.
KO_NET_NAME=kind
KO_NET_BRIDGE=nslo-kind0
KO_NET_SUBNET=${NETSLO_KIND_SUBNET:-198.19.200.0/24}
KO_NET_GATEWAY=${KO_NET_SUBNET%.0/24}.1
# Its IPv6 half (dual-stack and IPv6 kind clusters, --netslo-ip-family), in the IPv6 benchmarking range
# 2001:2::/48 (RFC 5180), also never routed off this machine.
KO_NET_SUBNET6=${NETSLO_KIND_SUBNET6:-2001:2:0:c8::/64}
KO_NET_GATEWAY6=${KO_NET_SUBNET6%::/64}::1
KO_NODE_IMAGE=localhost/netslo-kind-node:$KVER
NETSLO_VERSION=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$KO_REPO/netslo/__init__.py")
KO_AGENT_IMAGE=${NETSLO_AGENT_IMAGE:-localhost/netslo-agent:$NETSLO_VERSION}   # tagged with netslo's version

export DOCKER_HOST=unix://$KO_SOCK
export PATH=$KO_BIN:$PATH              # "docker" is the engine's own client (engine_client_link), for kind too
export GOFLAGS=-mod=mod GOTOOLCHAIN=local

gobuild_dir() { echo "$KO_CACHE/go/$1-$2"; }   # NAME VERSION -> directory holding bin/
# what the go-tools step builds (build.sh), read by the node image and the CNI builds
KO_COREDNS=$(gobuild_dir coredns "$COREDNS_VERSION")/bin/coredns
KO_CNI_BIN=$(gobuild_dir cni-plugins "$CNI_PLUGINS_VERSION")/bin
KO_CRICTL=$(gobuild_dir crictl "$CRICTL_VERSION")/bin/crictl
gomod_copy() {  # MODULE@VERSION DIR [SUM]: a writable copy of the module's source (go install refuses
  # modules with replace directives); with SUM the module's hash must be that
  local info dir
  info=$(go mod download -json "$1")
  dir=$(jq -r '.Dir // empty' <<<"$info")
  [[ -d $dir ]] || ko_die "go mod download $1: $(jq -r '.Error // "no directory"' <<<"$info")"
  [[ -z ${3:-} || $(jq -r .Sum <<<"$info") == "$3" ]] || ko_die "$1: module hash $(jq -r .Sum <<<"$info"), pinned $3"
  rm -rf "$2"; cp -r "$dir" "$2"; chmod -R u+w "$2"
}

KO_T0=${KO_T0:-$(date +%s.%N)}
export KO_T0

ko_log() { printf '[kind-offline %6.1fs] %s\n' "$(echo "$(date +%s.%N) - $KO_T0" | bc)" "$*" >&2; }
ko_die() { ko_log "ERROR: $*"; exit 1; }
# ko_timed NAME CMD...: run CMD and append "NAME seconds" to the timing log (cold/warm table of the note).
# Time spent waiting for the heavy lock (ko_heavy) is not counted, only logged.
ko_timed() {
  local name=$1 t0 rc=0 wait=0; shift
  rm -f "$KO_CACHE/.lockwait"
  t0=$(date +%s.%N)
  # Not "$@" || rc=$?: in an || list bash ignores errexit in everything the step runs.
  set +e; ( set -e; "$@" ); rc=$?; set -e
  [[ -f $KO_CACHE/.lockwait ]] && wait=$(cat "$KO_CACHE/.lockwait")
  printf '%s %s %.1f rc=%d lock-wait=%.0f\n' "$(date -u +%FT%TZ)" "$name" \
    "$(echo "$(date +%s.%N) - $t0 - $wait" | bc)" "$rc" "$wait" >> "$KO_CACHE/timings.log"
  return $rc
}
# ko_heavy CMD...: CPU-heavy step, serialized with the other engineers' timing-sensitive runs.
# ko_subtimed NAME CMD...: the same for a sub-step inside a step (its time is also part of the step's;
# it leaves the step's lock-wait record alone and logs none of its own).
ko_subtimed() {
  local name=$1 t0 rc=0; shift
  t0=$(date +%s.%N)
  set +e; ( set -e; "$@" ); rc=$?; set -e
  printf '%s %s %.1f rc=%d\n' "$(date -u +%FT%TZ)" "$name" "$(echo "$(date +%s.%N) - $t0" | bc)" "$rc" \
    >> "$KO_CACHE/timings.log"
  return $rc
}

# ko_step NAME FN: FN timed under the heavy lock, unless FN_cached says there is nothing to do
# (not run) or FN_light says what is left is light (run without the lock).
ko_step() {
  if declare -F "$2_cached" >/dev/null && "$2_cached"; then
    printf '%s %s cached\n' "$(date -u +%FT%TZ)" "$1" >> "$KO_CACHE/timings.log"; return 0
  fi
  if declare -F "$2_light" >/dev/null && "$2_light"; then ko_timed "$1" "$2"; return; fi
  ko_timed "$1" ko_heavy "$2"
}
# Runs in a subshell holding the lock only for this step (shell functions work too).
# A lock that cannot be taken (flock killed) stops the step: it never runs unserialized. The lock's fd
# is closed for the step's commands so no daemon started by it can keep holding the lock.
ko_heavy() {
  ( local t0; t0=$(date +%s.%N)
    flock 9 || { ko_log "could not take ${NETSLO_HEAVY_LOCK:-/tmp/netslo-heavy.lock}"; exit 1; }
    echo "$(date +%s.%N) - $t0" | bc > "$KO_CACHE/.lockwait"
    "$@" 9>&- ) 9>>"${NETSLO_HEAVY_LOCK:-/tmp/netslo-heavy.lock}"
}
