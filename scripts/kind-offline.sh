#!/usr/bin/env bash
# kind on a machine without a container registry: a private docker engine, a self-built kind node image
# and every image the cluster needs, all from Debian's packages and the Go module proxy.
#
#   scripts/kind-offline.sh up       build what is missing (cached) and start the engine
#   scripts/kind-offline.sh engine   start only the engine (Debian's packages fetched when missing);
#                                    builds nothing
#   scripts/kind-offline.sh env      print the exports that make "pytest --netslo-provider kind" use it
#   scripts/kind-offline.sh status   engine, clusters, cached artefacts; exit 0 only when the engine runs
#   scripts/kind-offline.sh down     delete kind clusters, containers, networks, mounts, cgroups and
#                                    processes this engine made, stop it (the caches stay)
#   scripts/kind-offline.sh build    only build/cache (the engine runs for the image steps, then stops)
#
# Caches: /var/cache/netslo/kind-offline (engine, kind, images, docker data-root) plus the local
# cluster's Kubernetes build (/var/cache/netslo/k8s) and agent image (/var/cache/netslo/images).
# Runtime state: /run/netslo-kind. Heavy steps hold /tmp/netslo-heavy.lock while they run.
# Calico: NETSLO_CALICO_SRC=<git repository of projectcalico/calico with tag v3.31.3> builds its images
# from that tree (scripts/kind-offline/calico.sh); without it the cluster has no Calico images.
# Cilium: NETSLO_CILIUM=1 builds Cilium 1.20.2 and helm from the Go module proxy
# (scripts/kind-offline/cilium.sh); without it the cluster has no Cilium images.
# Build times are appended to /var/cache/netslo/kind-offline/timings.log.
# See docs/kubernetes.md, "kind without a registry".
set -euo pipefail
shopt -s inherit_errexit
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=scripts/kind-offline/common.sh
. "$HERE/kind-offline/common.sh"
# shellcheck source=scripts/kind-offline/engine.sh
. "$HERE/kind-offline/engine.sh"
# shellcheck source=scripts/kind-offline/build.sh
. "$HERE/kind-offline/build.sh"
# shellcheck source=scripts/kind-offline/calico.sh
. "$HERE/kind-offline/calico.sh"
# shellcheck source=scripts/kind-offline/cilium.sh
. "$HERE/kind-offline/cilium.sh"

require_root() { [[ $(id -u) == 0 ]] || ko_die "must run as root (docker engine, mounts, cgroups)"; }

install_packages() {
  local need=() p
  for p in debootstrap jq bc iproute2 gcc libc6-dev util-linux; do dpkg -s "$p" >/dev/null 2>&1 || need+=("$p"); done
  if ((${#need[@]})); then
    ko_log "apt-get install ${need[*]}"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  fi
  # Go is needed only by what must be built: a cached toolchain comes up without it (sudo's
  # secure_path, say, lacks /usr/local/go/bin); the first build step that calls go stops with this line.
  # (A stand-in on PATH, not a shell function: "nice go ..." execs the program.)
  if ! command -v go >/dev/null; then
    mkdir -p "$KO_CACHE/no-go"
    printf '#!/bin/sh\necho "kind-offline: ERROR: go not found (the builds use the Go module proxy)" >&2\nexit 127\n' \
      > "$KO_CACHE/no-go/go"
    chmod 0755 "$KO_CACHE/no-go/go"
    PATH=$KO_CACHE/no-go:$PATH
  fi
}

cmd_build() {
  require_root; install_packages
  mkdir -p "$KO_CACHE"
  ko_timed engine-fetch engine_fetch
  engine_client_link
  ko_step kind build_kind
  ko_step kubernetes build_kubernetes
  ko_step go-tools build_go_tools
  ko_step component-images component_images
  ko_step calico-build calico_build || ko_log "calico: not built (see above); the cluster can run without it, Calico cannot"
  ko_step cilium-build cilium_build || ko_log "cilium: not built (see above); the cluster can run without it, Cilium cannot"
  local started=0
  engine_alive || { ko_timed engine-start engine_start; started=1; }
  ko_step agent-image agent_image   # first: the node image holds the agent's base layer
  ko_step node-image node_image
  ln -sf "$K8S_DIR/bin/kubectl" "$KO_BIN/kubectl"
  if ((started)) && [[ ${1:-} == stop ]]; then engine_stop_all; fi
}

cmd_engine() {
  install_packages
  ko_timed engine-fetch engine_fetch
  engine_client_link
  engine_alive || ko_timed engine-start engine_start
  ko_log "engine: running on $KO_SOCK (nothing built)"
}

cmd_up() {
  cmd_build
  engine_alive || ko_timed engine-start engine_start
  ko_log "up: engine on $KO_SOCK; node image $KO_NODE_IMAGE; eval \"\$($0 env)\" to use it"
}

agent_archive() {  # the agent image archive a new cluster's nodes import (NETSLO_AGENT_ARCHIVE)
  # Without the base layer when the node image's containerd holds it (its label names the key),
  # else the whole image (a node image built before, or no engine running to ask).
  local key
  key=$(cat "$KO_AGENT_CACHE/agent-base.image.tar.key" 2>/dev/null)
  if [[ -n $key && -f $KO_AGENT_CACHE/agent-thin.tar \
        && $(docker image inspect -f '{{index .Config.Labels "io.netslo.agent-base"}}' "$KO_NODE_IMAGE" 2>/dev/null) == "$key" ]]; then
    echo "$KO_AGENT_CACHE/agent-thin.tar"
  else
    echo "$KO_AGENT_CACHE/agent.tar"
  fi
}

cmd_env() {
  local src
  src=$(calico_manifest_dir 2>/dev/null || true)
  cat <<EOF
export DOCKER_HOST=unix://$KO_SOCK
export NETSLO_KIND=$KO_BIN/kind
export NETSLO_KIND_NODE_IMAGE=$KO_NODE_IMAGE
export NETSLO_KUBECTL=$K8S_DIR/bin/kubectl
export NETSLO_AGENT_IMAGE=$KO_AGENT_IMAGE
export NETSLO_AGENT_ARCHIVE=$(agent_archive)
EOF
  [[ -n $src ]] && echo "export NETSLO_CNI_MIRROR=$src"
  # kind and the provider run "docker" (the engine's own client) and the CNI installer "helm" from PATH
  echo "export PATH=$KO_BIN:\$PATH"
}

cmd_status() {
  local rc=0 c
  if engine_alive; then
    echo "engine: running, pid $(engine_pid), dockerd $(docker version -f '{{.Server.Version}}'), socket $KO_SOCK"
    for c in $("$KO_BIN/kind" get clusters 2>/dev/null); do
      echo "cluster $c: $(docker ps --filter "label=io.x-k8s.kind.cluster=$c" --format '{{.Names}} ({{.Status}})' | paste -sd, -)"
    done
  else
    echo "engine: not running"; rc=1
  fi
  echo "kind: $([[ -x $KO_BIN/kind ]] && "$KO_BIN/kind" version || echo missing)"
  echo "kubernetes: $([[ -f $K8S_DIR/.done && -x $K8S_DIR/bin/kubeadm ]] && echo "$KVER in $K8S_DIR" || echo "not built")"
  echo "component images: $(find "$KO_IMAGES" -maxdepth 1 -name '*.tar' 2>/dev/null | wc -l) in $KO_IMAGES"
  calico_status
  cilium_status
  echo "host: FORWARD policy $(iptables -S FORWARD 2>/dev/null | head -n1 | cut -d' ' -f3), ip_forward $(cat /proc/sys/net/ipv4/ip_forward)"
  return $rc
}

engine_stop_all() {  # clusters, containers, networks, then the engine and whatever it left behind
  if engine_alive; then
    local c
    for c in $("$KO_BIN/kind" get clusters 2>/dev/null); do
      ko_log "down: kind delete cluster --name $c"
      "$KO_BIN/kind" delete cluster --name "$c" >/dev/null 2>&1 || true
    done
    c=$(docker ps -aq)
    # shellcheck disable=SC2086
    [[ -n $c ]] && docker rm -f -v $c >/dev/null
    docker network prune -f >/dev/null 2>&1 || true
    docker network rm "$KO_NET_NAME" >/dev/null 2>&1 || true
    docker volume prune -f >/dev/null 2>&1 || true
  fi
  engine_stop
}

cmd_down() {
  require_root
  engine_stop_all
  local left
  left=$(engine_procs)
  [[ -z $left ]] || ko_die "down: engine processes still running: $left"
  if grep -qE " ($KO_STATE|$KO_DATA)[/ ]" /proc/self/mountinfo; then ko_die "down: mounts left under $KO_STATE or $KO_DATA"; fi
  ko_log "down: engine stopped; nothing of it runs or is mounted (caches kept in $KO_CACHE)"
}

case ${1:-} in
  up) require_root; cmd_up ;;
  engine) require_root; cmd_engine ;;
  build) cmd_build stop ;;
  env) cmd_env ;;
  status) cmd_status ;;
  down) cmd_down ;;
  *) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
