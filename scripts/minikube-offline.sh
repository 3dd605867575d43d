#!/usr/bin/env bash
# minikube on a machine without a container registry, on the offline kind toolchain's private docker
# engine (scripts/kind-offline.sh): minikube built from the Go module proxy, and a base image
# derived from the offline kind node image (which already holds Kubernetes, the component images and
# the CNI images) plus what minikube's docker driver needs of a node and kind's does not.
#
#   scripts/minikube-offline.sh build    build what is missing (cached); the engine must run
#                                        (scripts/kind-offline.sh up)
#   scripts/minikube-offline.sh env      print the exports that make "pytest --netslo-provider minikube"
#                                        use it (after those of kind-offline.sh env)
#   scripts/minikube-offline.sh status   cached artefacts and minikube profiles
#   scripts/minikube-offline.sh down     minikube delete --all --purge (the caches stay; the engine is
#                                        kind-offline.sh down's)
#
# What minikube v1.38.1 would download, and what replaces it here:
#   kicbase image (gcr.io, docker.io, GitHub)  --base-image: $MK_BASE_IMAGE, built below
#   preload tarball, component images (GCS)    --preload=false --cache-images=false: the images are in
#                                              the base image's containerd (from the kind node image)
#   kubeadm/kubelet/kubectl (dl.k8s.io)        in the base image (/var/lib/minikube/binaries/<v>) and
#                                              in $MINIKUBE_HOME's cache (minikube runs the cached
#                                              kubeadm on the host to learn the pause image's tag)
#   storage-provisioner addon (gcr.io)         --install-addons=false
#   bundled Calico/Cilium (docker.io, quay.io) --cni=false, then netslo's own installer (as on kind)
# The provider passes those flags when $NETSLO_MINIKUBE_BASE_IMAGE is set (netslo/providers/minikube.py).
#
# The base image: the kind node image + Debian's openssh-server and sudo (installed by apt in a build
# container on the host's network), a "docker" user in groups docker and sudo with password-less sudo
# and an unlocked account (minikube provisions the node over SSH as that user, key only; sshd without
# PAM refuses a locked account's keys), sbin directories on the SSH sessions' PATH (kubeadm's preflight
# looks for losetup there), kind's kubelet units
# removed (minikube writes its own), /version.json, and a containerd drop-in that puts
# restrict_oom_score_adj = true back before every containerd start: minikube sets it to false, and
# without CAP_SYS_RESOURCE (not in this machine's bounding set) runc cannot lower a pod's
# oom_score_adj, so every sandbox would fail.
# The nodes sit on their own docker network $MK_NET ($MK_SUBNET, the benchmarking range: never
# routed off this machine); minikube would otherwise make one in 192.168.49.0/24, inside Calico's pod
# subnet. Caches: $MK_CACHE. Build times are appended to the kind-offline timings log.
set -euo pipefail
shopt -s inherit_errexit
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=scripts/kind-offline/common.sh
. "$HERE/kind-offline/common.sh"
# shellcheck source=scripts/kind-offline/engine.sh
. "$HERE/kind-offline/engine.sh"

MK_VERSION=v1.38.1                   # k8s.io/minikube on the Go module proxy
# The checksum database has no entry for it (the proxy's sumdb lookup answers 404), so "go mod
# download" verifies nothing: its module hash is pinned here instead (recorded 2026-12-02, the zip's
# origin commit c93a4cb9311efc66b90d33ea03f75f2c4120e9b0 = tag v1.38.1) and checked before building.
MK_SUM=h1:urjR4342qaMMoIdhivlUhHPWLsVE4b1fmFRdnL+wD8Y=
MK_RECIPE=4                          # bump when the base image recipe below changes
MK_CACHE=${NETSLO_MINIKUBE_CACHE:-/var/cache/netslo/minikube}
MK_BIN=$MK_CACHE/bin
MK_HOME=$MK_CACHE/home               # MINIKUBE_HOME (profiles, keys, the binary cache)
MK_KUBECONFIG=$MK_CACHE/kubeconfig   # minikube's contexts, not root's ~/.kube/config
MK_BASE_IMAGE=localhost/netslo-minikube-base:$KVER
MK_NET=netslo-minikube
MK_NET_BRIDGE=nslo-mk0
MK_SUBNET=${NETSLO_MINIKUBE_SUBNET:-198.19.201.0/24}
MK_GATEWAY=${MK_SUBNET%.0/24}.1

require_root() { [[ $(id -u) == 0 ]] || ko_die "must run as root (docker engine)"; }

mk_minikube_cached() { [[ -x $MK_BIN/minikube ]] && grep -qx "$MK_VERSION" <<<"$("$MK_BIN/minikube" version --short 2>/dev/null)"; }
mk_minikube() {
  local work=$MK_CACHE/work-minikube commit ld
  ko_log "minikube: go build k8s.io/minikube@$MK_VERSION ./cmd/minikube"
  export GONOSUMDB=k8s.io/minikube   # (see MK_SUM) its dependencies are checked as usual
  gomod_copy "k8s.io/minikube@$MK_VERSION" "$work" "$MK_SUM"
  commit=$(go mod download -json "k8s.io/minikube@$MK_VERSION" | jq -r '.Origin.Hash // "unknown"')
  # minikube's Makefile: MINIKUBE_LDFLAGS and MINIKUBE_BUILD_TAGS. Since v1.38 the kvm2 driver is in the
  # binary (pkg/drivers/kvm, libvirt.org/go/libvirt): tag libvirt_dlopen opens libvirt at run time, so
  # no libvirt is needed to build or to run the docker driver; that needs cgo (with CGO_ENABLED=0 the
  # build stops at "pkg/drivers/kvm/domain.go:30:40: undefined: libvirt.Domain", seen 2026-12-07).
  ld="-s -w -X k8s.io/minikube/pkg/version.version=$MK_VERSION -X k8s.io/minikube/pkg/version.isoVersion=$MK_VERSION"
  ld+=" -X k8s.io/minikube/pkg/version.gitCommitID=$commit -X k8s.io/minikube/pkg/version.storageProvisionerVersion=v5"
  mkdir -p "$MK_BIN"
  (cd "$work" && CGO_ENABLED=1 nice -n 19 go build -trimpath -tags libvirt_dlopen -ldflags "$ld" \
    -o "$MK_BIN/minikube.tmp" ./cmd/minikube)
  mv "$MK_BIN/minikube.tmp" "$MK_BIN/minikube"; rm -rf "$work"
  "$MK_BIN/minikube" version >&2
}

mk_base_key() {
  { echo "$MK_RECIPE $MK_VERSION $KVER"
    docker image inspect -f '{{.Id}}' "$KO_NODE_IMAGE"; } | sha256sum | cut -c1-16
}
mk_base_image_cached() {
  [[ $(docker image inspect -f '{{index .Config.Labels "io.netslo.minikube-key"}}' "$MK_BASE_IMAGE" 2>/dev/null) == "$(mk_base_key)" ]]
}
mk_base_image() {
  local key cid ctx
  docker image inspect "$KO_NODE_IMAGE" >/dev/null 2>&1 \
    || ko_die "no $KO_NODE_IMAGE in the engine: run scripts/kind-offline.sh up first"
  key=$(mk_base_key)
  ko_log "base image: $MK_BASE_IMAGE from $KO_NODE_IMAGE (key $key)"
  # The host's network: apt reaches the Debian mirror the way the host does (the engine has no bridge).
  cid=$(docker run -d --init --network host --entrypoint sleep --security-opt seccomp=unconfined "$KO_NODE_IMAGE" infinity)
  # shellcheck disable=SC2064  # runs in ko_heavy's subshell: its EXIT removes the build container
  trap "docker rm -f $cid >/dev/null 2>&1 || true" EXIT
  docker exec -e DEBIAN_FRONTEND=noninteractive "$cid" sh -euc '
    apt="apt-get -qq -o Acquire::Check-Valid-Until=false -o Acquire::Check-Date=false"
    $apt update
    $apt install -y --no-install-recommends openssh-server sudo >/dev/null
    apt-get clean; rm -rf /var/lib/apt/lists/*'
  docker exec -i "$cid" sh -c 'mkdir -p /usr/local/lib/netslo && cat > /usr/local/lib/netslo/containerd-restrict-oom && \
    chmod 0755 /usr/local/lib/netslo/containerd-restrict-oom' <<'EOF'
#!/bin/sh
# ExecStartPre of containerd (netslo's minikube base image): minikube writes restrict_oom_score_adj =
# false; without CAP_SYS_RESOURCE runc cannot lower a pod's oom_score_adj and every sandbox fails.
exec sed -i -E 's/^([[:space:]]*restrict_oom_score_adj[[:space:]]*=[[:space:]]*).*/\1true/' /etc/containerd/config.toml
EOF
  docker exec "$cid" sh -euc "
    # minikube's node user, as in its kicbase Dockerfile
    addgroup --system docker >/dev/null
    adduser --ingroup docker --disabled-password --gecos '' docker >/dev/null
    # Debian's adduser locks the account (!); sshd without PAM then refuses even its keys
    usermod -p '*' docker
    adduser docker sudo >/dev/null
    echo '%sudo ALL=(ALL) NOPASSWD:ALL' > /etc/sudoers.d/minikube; chmod 0440 /etc/sudoers.d/minikube
    install -d -o docker -g docker -m 0700 /home/docker/.ssh
    sed -ri 's/^UsePAM yes/#UsePAM yes/' /etc/ssh/sshd_config
    # minikube runs 'sudo env PATH=/var/lib/minikube/binaries/<v>:\$PATH kubeadm init' over SSH: the
    # session's PATH must hold the sbin directories (kubeadm's preflight looks for losetup there);
    # Debian's sshd gives users /usr/local/bin:/usr/bin:/bin:/usr/games
    echo 'SetEnv PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' > /etc/ssh/sshd_config.d/10-netslo-path.conf
    systemctl enable ssh.service >/dev/null 2>&1
    test -e /etc/systemd/system/multi-user.target.wants/ssh.service
    # kind's kubelet units would shadow the ones minikube writes (/lib/systemd/system/kubelet.service)
    rm -rf /etc/systemd/system/kubelet.service /etc/systemd/system/kubelet.service.d \
      /etc/systemd/system/multi-user.target.wants/kubelet.service
    mkdir -p /etc/systemd/system/containerd.service.d
    printf '[Service]\nExecStartPre=/usr/local/lib/netslo/containerd-restrict-oom\n' \
      > /etc/systemd/system/containerd.service.d/10-netslo.conf
    mkdir -p /var/lib/minikube/binaries/$KVER
    cp /usr/bin/kubeadm /usr/bin/kubelet /usr/bin/kubectl /var/lib/minikube/binaries/$KVER/
    echo '{\"iso_version\": \"$MK_VERSION\", \"kicbase_version\": \"netslo-$key\", \"minikube_version\": \"$MK_VERSION\", \"commit\": \"netslo\"}' > /version.json
    test -x /usr/sbin/sshd && test -x /usr/bin/sudo && test -x /usr/bin/scp && crictl --version >/dev/null"
  docker commit "$cid" "$MK_BASE_IMAGE-stage" >/dev/null
  ctx=$(mktemp -d)
  printf 'FROM %s\nENV container=docker\nSTOPSIGNAL SIGRTMIN+3\nENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]\nCMD []\nEXPOSE 22\nLABEL io.netslo.minikube-key=%s io.netslo.minikube=%s\n' \
    "$MK_BASE_IMAGE-stage" "$key" "$MK_VERSION" > "$ctx/Dockerfile"
  DOCKER_BUILDKIT=0 docker build -q -t "$MK_BASE_IMAGE" "$ctx" >/dev/null
  rm -rf "$ctx"; docker rmi "$MK_BASE_IMAGE-stage" >/dev/null
  ko_log "base image: $MK_BASE_IMAGE ready"
}

mk_home() {  # kubeadm/kubelet/kubectl where minikube looks before downloading them (hard links)
  local d=$MK_HOME/.minikube/cache/linux/amd64/$KVER f
  mkdir -p "$d"
  for f in kubeadm kubelet kubectl; do
    [[ -x $d/$f ]] || ln -f "$K8S_DIR/bin/$f" "$d/$f" 2>/dev/null || cp "$K8S_DIR/bin/$f" "$d/$f"
  done
}

mk_network() {  # the nodes' docker network, made by us so its range is known (no masquerading)
  docker network inspect "$MK_NET" >/dev/null 2>&1 && return
  docker network create -d bridge --subnet "$MK_SUBNET" --gateway "$MK_GATEWAY" \
    -o "com.docker.network.bridge.name=$MK_NET_BRIDGE" -o com.docker.network.bridge.enable_ip_masquerade=false \
    -o com.docker.network.driver.mtu=1500 "$MK_NET" >/dev/null
}

cmd_build() {
  require_root
  engine_alive || ko_die "the engine is not running: scripts/kind-offline.sh up first"
  [[ -x $K8S_DIR/bin/kubeadm ]] || ko_die "no Kubernetes build in $K8S_DIR: scripts/kind-offline.sh up first"
  mkdir -p "$MK_CACHE"
  ko_step minikube-build mk_minikube
  ko_step minikube-base-image mk_base_image
  mk_home
  mk_network
}

cmd_env() {
  cat <<EOF
export MINIKUBE_HOME=$MK_HOME
export MINIKUBE_WANTUPDATENOTIFICATION=false
export KUBECONFIG=$MK_KUBECONFIG
export NETSLO_MINIKUBE=$MK_BIN/minikube
export NETSLO_MINIKUBE_BASE_IMAGE=$MK_BASE_IMAGE
export NETSLO_MINIKUBE_KUBERNETES_VERSION=$KVER
export NETSLO_MINIKUBE_NETWORK=$MK_NET
EOF
}

cmd_status() {
  echo "minikube: $([[ -x $MK_BIN/minikube ]] && "$MK_BIN/minikube" version --short || echo missing)"
  if engine_alive; then
    echo "base image: $(docker image inspect -f '{{.Id}} {{index .Config.Labels "io.netslo.minikube-key"}}' "$MK_BASE_IMAGE" 2>/dev/null || echo missing)"
    if [[ -x $MK_BIN/minikube ]]; then MINIKUBE_HOME=$MK_HOME "$MK_BIN/minikube" profile list 2>/dev/null || true; fi
  else
    echo "engine: not running"
  fi
}

release_node_cgroups() {
  # minikube's nodes share this host's cgroup namespace (kind's do not). On this cgroup v1 hybrid host
  # their systemd and kubelets mount the v1 controllers the host leaves unmounted (hugetlb,
  # net_cls,net_prio, perf_event here) and make cgroups in them, and kubepods/ at the root of the
  # host's cgroup2 hierarchy; minikube delete leaves all of it. The extra hierarchies then show in
  # every process's /proc/self/cgroup, and a later kind node's kubelet refuses to start: "invalid
  # configuration: cgroup ["kubelet"] has some missing paths: /sys/fs/cgroup/hugetlb/kubelet.slice"
  # (seen 2026-11-27). Each such hierarchy is mounted, emptied (rmdir refuses a cgroup that holds a
  # process) and unmounted until the kernel drops it (removed cgroups linger for a moment).
  local u=/sys/fs/cgroup/unified/kubepods entry ctl mnt i hierarchies
  if [[ -d $u ]] && ! pgrep -x kubelet >/dev/null; then
    find "$u" -depth -type d -exec rmdir {} + 2>/dev/null || ko_log "down: $u still holds processes; left"
  fi
  mapfile -t hierarchies < /proc/self/cgroup
  for entry in "${hierarchies[@]}"; do
    ctl=$(cut -d: -f2 <<< "$entry")
    [[ -n $ctl && $ctl != name=* ]] || continue
    grep -qE "^[^ ]+ [^ ]+ cgroup [^ ]*(^|,)${ctl}(,| )" /proc/self/mounts && continue   # the host's own
    mnt=$(mktemp -d)
    for i in 1 2 3 4 5; do
      mount -t cgroup -o "$ctl" none "$mnt" || break
      find "$mnt" -mindepth 1 -depth -type d -exec rmdir {} + 2>/dev/null || true
      umount "$mnt"
      grep -q ":$ctl:" /proc/self/cgroup || break
      sleep 1
    done
    rmdir "$mnt"
    if grep -q ":$ctl:" /proc/self/cgroup; then ko_log "down: cgroup hierarchy $ctl is still there"
    else ko_log "down: released the cgroup hierarchy $ctl minikube's nodes had made"; fi
  done
}

cmd_down() {
  require_root
  if [[ -x $MK_BIN/minikube ]] && engine_alive; then
    MINIKUBE_HOME=$MK_HOME KUBECONFIG=$MK_KUBECONFIG "$MK_BIN/minikube" delete --all --purge >&2 || true
    docker network rm "$MK_NET" >/dev/null 2>&1 || true
  fi
  rm -rf "${MK_HOME:?}/.minikube" "$MK_KUBECONFIG"
  release_node_cgroups
  ko_log "down: minikube profiles deleted (caches kept in $MK_CACHE)"
}

case ${1:-} in
  build) cmd_build ;;
  env) cmd_env ;;
  status) cmd_status ;;
  down) cmd_down ;;
  *) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
