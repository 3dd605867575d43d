# shellcheck shell=bash
# Builds of the offline kind toolchain (sourced by scripts/kind-offline.sh). Everything comes from
# Debian's packages and the Go module proxy and is cached under $KO_CACHE (/var/cache/netslo/kind-offline)
# and beside it (/var/cache/netslo/k8s: Kubernetes and etcd; /var/cache/netslo/images: the agent
# image). A cached step is skipped; an interrupted one is redone (each result is written under a
# temporary name first).

PACK=(python3 "$KO_HERE/image_pack.py")
NODE_RECIPE=1   # bump when the node image recipe below changes (the cache keys hold inputs, not this code)
NODE_LAYER_RECIPE=3   # the same for the node layer alone (node_image): no base rebuild
# the nodes' unpacked image layers on a tmpfs while the machine has this much memory available (MB;
# 0 = always, off = never): scripts/kind-offline/snapshots-tmpfs
NODE_TMPFS_MIN_MB=${NETSLO_NODE_TMPFS_MIN_MB:-6144}

# ---- Go binaries ----------------------------------------------------------------------------------
# <step>_cached: true when the step has nothing to do, so it need not wait for the heavy lock.
build_kind_cached() { [[ -x $KO_BIN/kind ]] && grep -q "$KIND_VERSION" <<<"$("$KO_BIN/kind" version 2>/dev/null)"; }
build_kind() {
  build_kind_cached && return
  ko_log "kind: go install $KIND_MODULE@$KIND_VERSION"
  mkdir -p "$KO_BIN"
  CGO_ENABLED=0 GOBIN=$KO_BIN nice -n 19 go install "$KIND_MODULE@$KIND_VERSION"
}

build_kubernetes() {  # Kubernetes (kubeadm included), then etcd at the version kubeadm asks for
  ko_log "kubernetes: scripts/kind-offline/kubernetes.sh (cached in $K8S_DIR)"
  bash "$KO_HERE/kubernetes.sh"
  local want
  want=$(kubeadm_image etcd)
  bash "$KO_HERE/kubernetes.sh" etcd "v${want%-*}"
}

build_kubernetes_cached() {
  local e
  [[ -f $K8S_DIR/.done && -x $K8S_DIR/bin/kubeadm && -x $K8S_DIR/bin/kubelet ]] || return 1
  e=$(kubeadm_image etcd); [[ -f $(etcd_dir "v${e%-*}")/.done ]]
}

kubeadm_images() {  # the images kubeadm of this Kubernetes build asks for
  "$K8S_DIR/bin/kubeadm" config images list --kubernetes-version "$KVER" 2>/dev/null
}
kubeadm_image() {  # NAME -> tag kubeadm asks for (e.g. etcd -> 3.6.5-0)
  kubeadm_images | awk -F: -v n="$1" '{split($1, p, "/"); if (p[length(p)] == n) print $2}'
}

build_go_tools_cached() {
  [[ -x $KO_COREDNS && -x $KO_CNI_BIN/bandwidth && -x $KO_CRICTL ]]
}
build_go_tools() {  # coredns at kubeadm's tag; the CNI plugins and crictl of the node image
  local dns out
  dns=$(kubeadm_image coredns)
  [[ $dns == "$COREDNS_VERSION" ]] || ko_die "kubeadm $KVER asks for coredns $dns, this script pins $COREDNS_VERSION"
  out=$(gobuild_dir coredns "$COREDNS_VERSION")
  if [[ ! -x $out/bin/coredns ]]; then
    ko_log "coredns: go install github.com/coredns/coredns@$COREDNS_VERSION"
    rm -rf "$out"; mkdir -p "$out/bin.tmp"
    CGO_ENABLED=0 GOBIN=$out/bin.tmp nice -n 19 go install -trimpath -ldflags '-s -w' \
      "github.com/coredns/coredns@$COREDNS_VERSION"
    mv "$out/bin.tmp" "$out/bin"
  fi
  out=$(gobuild_dir cni-plugins "$CNI_PLUGINS_VERSION")
  if [[ ! -x $out/bin/bandwidth ]]; then
    ko_log "CNI plugins: go install github.com/containernetworking/plugins@$CNI_PLUGINS_VERSION"
    rm -rf "$out"; mkdir -p "$out/bin.tmp"
    local m=github.com/containernetworking/plugins/plugins p pk=()
    for p in ipam/host-local main/loopback main/ptp main/bridge meta/portmap meta/bandwidth meta/tuning; do
      pk+=("$m/$p@$CNI_PLUGINS_VERSION")
    done
    CGO_ENABLED=0 GOBIN=$out/bin.tmp nice -n 19 go install -trimpath -ldflags '-s -w' "${pk[@]}"
    mv "$out/bin.tmp" "$out/bin"
  fi
  # crictl: kind's base image has it (kind load and kind export logs call it in the nodes); its module
  # has replace directives, so it is built from a copy of the module's source
  out=$(gobuild_dir crictl "$CRICTL_VERSION")
  if [[ ! -x $out/bin/crictl ]]; then
    ko_log "crictl: go build sigs.k8s.io/cri-tools@$CRICTL_VERSION ./cmd/crictl"
    rm -rf "$out"; mkdir -p "$out/bin.tmp"
    gomod_copy "sigs.k8s.io/cri-tools@$CRICTL_VERSION" "$out/src"
    (cd "$out/src" && CGO_ENABLED=0 nice -n 19 go build -trimpath \
      -ldflags "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=${CRICTL_VERSION#v}" -o "$out/bin.tmp/crictl" ./cmd/crictl)
    rm -rf "$out/src"; mv "$out/bin.tmp" "$out/bin"
  fi
}

# ---- component images (what kubeadm config images list names) --------------------------------------
# Single-binary images for the control plane, etcd, coredns and pause; kube-proxy needs iptables and
# conntrack, so it sits on a small Debian rootfs. Packed as docker-archive tarballs (image_pack.py):
# imported into the node image's containerd, never pushed anywhere.
component_images_cached() {
  local line name
  while read -r line; do
    name=${line%:*}; name=${name##*/}
    [[ -f $KO_IMAGES/$name-${line##*:}.tar.id ]] || return 1
  done < <(kubeadm_images)
}
component_images() {
  local line name tag out bin etcdv layer
  mkdir -p "$KO_IMAGES"
  etcdv=$(kubeadm_image etcd); etcdv=v${etcdv%-*}
  while read -r line; do
    name=${line%:*}; name=${name##*/}; tag=${line##*:}
    out=$KO_IMAGES/$name-$tag.tar
    [[ -f $out && -f $out.id ]] && continue
    case $name in
      kube-apiserver|kube-controller-manager|kube-scheduler) bin=$K8S_DIR/bin/$name ;;
      etcd) bin=$(etcd_dir "$etcdv")/bin/etcd ;;
      coredns) bin=$KO_COREDNS ;;
      pause) bin=$K8S_DIR/bin/pause ;;
      kube-proxy) kube_proxy_image "$line" "$out"; continue ;;
      *) ko_die "kubeadm asks for $line, which this script does not build" ;;
    esac
    [[ -x $bin ]] || ko_die "$name: $bin missing"
    layer=$KO_IMAGES/$name.layer.tar
    case $name in
      coredns) "${PACK[@]}" layer --file "$bin:/coredns:0755" "$layer"
               "${PACK[@]}" image --tag "$line" --layer "$layer" --entrypoint '["/coredns"]' "$out.tmp" > "$out.id" ;;
      pause)   "${PACK[@]}" layer --file "$bin:/pause:0755" "$layer"
               "${PACK[@]}" image --tag "$line" --layer "$layer" --entrypoint '["/pause"]' "$out.tmp" > "$out.id" ;;
      *)       "${PACK[@]}" layer --file "$bin:/usr/local/bin/$name:0755" "$layer"
               "${PACK[@]}" image --tag "$line" --layer "$layer" --env PATH=/usr/local/bin:/usr/bin:/bin \
                 --entrypoint "[\"/usr/local/bin/$name\"]" "$out.tmp" > "$out.id" ;;
    esac
    mv "$out.tmp" "$out"; rm -f "$layer" "$layer.sha256"
    ko_log "image $line -> $out"
  done < <(kubeadm_images)
}

debian_layer() {  # LAYER LOG PACKAGES [PATH...]: LAYER = a $SUITE minbase rootfs + PACKAGES (comma list)
  # as one image layer, cached (nothing runs when LAYER exists). The rootfs must be merged-/usr (the
  # layers put binaries in /usr/bin) and hold each PATH executable. Apt caches, docs, logs, /dev and
  # runit's default services (/etc/service, /etc/sv: images bring their own) are left out, and
  # resolv.conf is emptied (not the build host's).
  local layer=$1 log=$2 debs=$3 root=${1%.tar}.rootfs name path; shift 3
  [[ -f $layer ]] && return 0
  name=$(basename "$layer")
  ko_log "$name: debootstrap $SUITE minbase + $debs"
  rm -rf "$root"
  nice -n 19 debootstrap --variant=minbase --include="$debs" "$SUITE" "$root" "$DEBIAN_MIRROR" > "$log" 2>&1 \
    || { tail -n 20 "$log" >&2; return 1; }
  [[ -L $root/bin && -L $root/sbin ]] || ko_die "$name: the $SUITE rootfs is not merged-/usr (the layer puts binaries in /usr/bin)"
  for path in "$@"; do
    [[ -x $root/$path ]] || ko_die "$name: the rootfs lacks /$path (packages: $debs)"
  done
  rm -rf "${root:?}"/var/cache/apt/* "${root:?}"/var/lib/apt/lists/* "${root:?}"/usr/share/doc/* \
    "${root:?}"/usr/share/man/* "${root:?}"/usr/share/locale/* "${root:?}"/dev/* "${root:?}"/var/log/* \
    "${root:?}"/etc/service "${root:?}"/etc/sv
  : > "$root/etc/resolv.conf"
  "${PACK[@]}" layer "$root" "$layer.tmp"; mv "$layer.tmp" "$layer"
  rm -rf "$root"
}

kube_proxy_image() {  # REF OUT: Debian minbase + iptables/conntrack + kube-proxy
  local ref=$1 out=$2 base=$KO_IMAGES/netbase-$SUITE.layer.tar
  debian_layer "$base" "$KO_CACHE/debootstrap-netbase.log" iptables,conntrack,ipset,kmod,iproute2 \
    usr/sbin/iptables usr/sbin/conntrack usr/sbin/ipset
  "${PACK[@]}" layer --file "$K8S_DIR/bin/kube-proxy:/usr/local/bin/kube-proxy:0755" "$KO_IMAGES/kube-proxy.layer.tar"
  "${PACK[@]}" image --tag "$ref" --layer "$base" --layer "$KO_IMAGES/kube-proxy.layer.tar" \
    --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --entrypoint '["/usr/local/bin/kube-proxy"]' "$out.tmp" > "$out.id"
  mv "$out.tmp" "$out"; rm -f "$KO_IMAGES/kube-proxy.layer.tar" "$KO_IMAGES/kube-proxy.layer.tar.sha256"
  ko_log "image $ref -> $out"
}

# ---- node image -------------------------------------------------------------------------------------
# What "kind build node-image" does (it cannot work offline: it pulls pause, etcd, coredns, kindnetd and
# local-path-provisioner), done with Debian packages and kind's own base files from the Go module:
#  1. base: debootstrap bookworm with the packages of kind's images/base/Dockerfile (containerd and
#     runc are Debian's 1.6/1.1 instead of kind's own builds; no kindnetd, fuse-overlayfs,
#     nfs/iscsi: not available or not needed), kind's images/base/files copied in and the Dockerfile's
#     RUN steps replayed in a chroot; "docker import" plus a one-line Dockerfile for STOPSIGNAL
#     (dockerd 20.10 rejects STOPSIGNAL in "import -c"/"commit --change").
#  2. node: kubeadm/kubelet/kubectl in /usr/bin, crictl in /usr/local/bin (as in kind's base image),
#     /kind/version, the component images imported into the node's containerd (k8s.io namespace, not
#     unpacked, as kind does), "docker commit". Their blobs (containerd's content store, 1.9 GB with
#     both CNIs' images) live in the image's root file system, /opt/netslo/containerd-content, with a
#     symlink from /var/lib/containerd: kind gives every node an anonymous volume for /var, which docker
#     fills with a copy of the image's /var when it creates the node (1.9 GB per node per cluster, and
#     as much deleted with it), while the root file system is an overlay that shares the image's files.
#     Snapshots (unpacked layers) stay off the image: overlayfs cannot use an overlay as its upper; a
#     drop-in puts them on a tmpfs when there is memory (snapshots-tmpfs), else on the volume. The
#     agent image's base layer is imported too, as localhost/netslo-agent-base:<key> (agent-image.sh):
#     a new cluster's nodes then import only the netslo layer (agent-thin.tar).
# containerd's config gets restrict_oom_score_adj = true: this machine's bounding set lacks
# CAP_SYS_RESOURCE, so containerd cannot lower pods' oom_score_adj, every sandbox would fail with
# "can't get final child's PID from pipe: EOF" and kubeadm would time out at wait-control-plane.
node_key() {
  { echo "$NODE_RECIPE $NODE_LAYER_RECIPE $KIND_VERSION $KVER $SUITE $CNI_PLUGINS_VERSION"
    cat "$KO_IMAGES"/*.tar.id "$KO_AGENT_CACHE/agent-base.image.tar.key" 2>/dev/null
    sha256sum "$K8S_DIR"/bin/{kubeadm,kubelet,kubectl} "$KO_CRICTL" \
      "$KO_HERE/runc-wrapper" "$KO_HERE/snapshots-tmpfs" | cut -c1-64; echo "tmpfs $NODE_TMPFS_MIN_MB"; } \
    | sha256sum | cut -c1-16
}

node_base() {  # -> docker image netslo-kind-base:<key> (only the base recipe in the key)
  local key tar root kindfiles
  key=$(echo "$NODE_RECIPE $KIND_VERSION $SUITE $CNI_PLUGINS_VERSION" | sha256sum | cut -c1-16)
  NODE_BASE=localhost/netslo-kind-base:$key
  docker image inspect "$NODE_BASE" >/dev/null 2>&1 && return
  tar=$KO_CACHE/node-base-$key.tar
  if [[ ! -f $tar ]]; then
    root=$KO_CACHE/rootfs-node
    kindfiles=$(go mod download -json "$KIND_MODULE@$KIND_VERSION" | jq -r .Dir)/images/base/files
    ko_log "node base: debootstrap $SUITE (kind's base packages + Debian containerd/runc)"
    rm -rf "$root"
    nice -n 19 debootstrap --variant=minbase \
      --include=systemd,conntrack,iptables,nftables,iproute2,ethtool,util-linux,mount,kmod,libseccomp2,pigz,e2fsprogs,bash,ca-certificates,curl,jq,procps,containerd,runc \
      "$SUITE" "$root" "$DEBIAN_MIRROR" > "$KO_CACHE/debootstrap-node.log" 2>&1 \
      || { tail -n 20 "$KO_CACHE/debootstrap-node.log" >&2; return 1; }
    # kind's base Dockerfile: COPY files/...
    install -m 0755 "$kindfiles"/usr/local/bin/* "$root/usr/local/bin/"
    mkdir -p "$root/kind/bin" "$root/LICENSES" "$root/etc/containerd" "$root/etc/systemd/system/kubelet.service.d"
    cp -r "$kindfiles"/kind/. "$root/kind/"; chmod 0755 "$root/kind" "$root/kind/bin" "$root"/kind/bin/*
    cp "$kindfiles"/LICENSES/* "$root/LICENSES/"
    cp "$kindfiles"/etc/crictl.yaml "$root/etc/"
    cp "$kindfiles"/etc/containerd/* "$root/etc/containerd/"
    cp "$kindfiles"/etc/default/* "$root/etc/default/"
    cp "$kindfiles"/etc/sysctl.d/* "$root/etc/sysctl.d/"
    find "$kindfiles/etc/systemd/system" -maxdepth 1 -type f -exec cp {} "$root/etc/systemd/system/" \;
    cp "$kindfiles"/etc/systemd/system/kubelet.service.d/* "$root/etc/systemd/system/kubelet.service.d/"
    chmod -R u+w,go-w "$root/etc" "$root/kind" "$root/LICENSES"
    # kind's RUN steps
    find "$root/lib/systemd/system/sysinit.target.wants/" -name systemd-tmpfiles-setup.service -delete
    rm -f "$root"/lib/systemd/system/multi-user.target.wants/* "$root"/etc/systemd/system/*.wants/* \
      "$root"/lib/systemd/system/local-fs.target.wants/* "$root"/lib/systemd/system/sockets.target.wants/*udev* \
      "$root"/lib/systemd/system/sockets.target.wants/*initctl* "$root"/lib/systemd/system/basic.target.wants/*
    echo "ReadKMsg=no" >> "$root/etc/systemd/journald.conf"
    ln -sf /usr/lib/systemd/systemd "$root/sbin/init"
    # kind's containerd.service runs /usr/local/bin/containerd (kind builds its own); Debian's is in /usr/bin.
    ln -sf /usr/bin/containerd "$root/usr/local/bin/containerd"
    chroot "$root" systemctl enable kubelet.service containerd.service undo-mount-hacks.service >/dev/null 2>&1
    chroot "$root" systemctl mask systemd-binfmt.service >/dev/null 2>&1
    mkdir -p "$root/etc/kubernetes/manifests" "$root/opt/cni/bin"
    # cri-base.json as kind makes it: "ctr oci spec" + the product-files hook, without rlimits
    chroot "$root" ctr oci spec \
      | jq '.hooks.createContainer[.hooks.createContainer| length] |= . + {"path": "/kind/bin/mount-product-files.sh"}' \
      | jq 'del(.process.rlimits)' > "$root/etc/containerd/cri-base.json"
    sed -i -e 's/^\(\s*restrict_oom_score_adj\s*=\s*\).*/\1true/' "$root/etc/containerd/config.toml"
    grep -q 'restrict_oom_score_adj = true' "$root/etc/containerd/config.toml" \
      || ko_die "node base: could not set restrict_oom_score_adj in kind's containerd config"
    install -m 0755 "$KO_CNI_BIN"/{host-local,loopback,ptp,portmap,bandwidth} "$root/opt/cni/bin/"
    rm -rf "${root:?}"/var/cache/apt/* "${root:?}"/var/lib/apt/lists/* "${root:?}"/usr/share/doc/* \
      "${root:?}"/usr/share/man/* "${root:?}"/usr/share/locale/* "${root:?}"/var/log/*.log
    : > "$root/etc/resolv.conf"; : > "$root/etc/machine-id"
    tar -C "$root" --numeric-owner --xattrs -cf "$tar.tmp" . && mv "$tar.tmp" "$tar"
    rm -rf "$root"
  fi
  ko_log "node base: docker import $tar -> $NODE_BASE"
  docker import -c 'ENV container=docker' "$tar" "$NODE_BASE-noss" >/dev/null
  with_stopsignal "$NODE_BASE-noss" "$NODE_BASE" '["/usr/local/bin/entrypoint", "/sbin/init"]'
  docker rmi "$NODE_BASE-noss" >/dev/null
}

with_stopsignal() {  # FROM TO ENTRYPOINT-JSON: a one-line Dockerfile (classic builder) adds STOPSIGNAL
  local ctx
  ctx=$(mktemp -d)
  printf 'FROM %s\nENV container=docker\nSTOPSIGNAL SIGRTMIN+3\nENTRYPOINT %s\nCMD []\n' "$1" "$3" > "$ctx/Dockerfile"
  DOCKER_BUILDKIT=0 docker build -q -t "$2" "$ctx" >/dev/null
  rm -rf "$ctx"
}

node_image_cached() {
  [[ $(docker image inspect -f '{{index .Config.Labels "io.netslo.key"}}' "$KO_NODE_IMAGE" 2>/dev/null) == "$(node_key)" ]]
}
node_image() {  # -> $KO_NODE_IMAGE (labelled with its input key; rebuilt when an input changes)
  local key cid pause f
  [[ $NODE_TMPFS_MIN_MB =~ ^([0-9]+|off)$ ]] \
    || ko_die "NETSLO_NODE_TMPFS_MIN_MB: '$NODE_TMPFS_MIN_MB' is not a number of MB or 'off'"
  key=$(node_key)
  node_image_cached && return
  node_base
  pause=$(kubeadm_images | grep '/pause:')
  ko_log "node image: assembling $KO_NODE_IMAGE from $NODE_BASE (key $key)"
  # --init: docker-init as PID 1 reaps the containerd we stop below (sleep would leave a zombie).
  cid=$(docker run -d --init --entrypoint sleep --security-opt seccomp=unconfined "$NODE_BASE" infinity)
  # shellcheck disable=SC2064  # runs in ko_heavy's subshell: its EXIT removes the build container
  trap "docker rm -f $cid >/dev/null 2>&1 || true" EXIT
  for f in kubeadm kubelet kubectl; do
    docker exec -i "$cid" sh -c "cat > /usr/bin/$f && chmod 0755 /usr/bin/$f" < "$K8S_DIR/bin/$f"
  done
  docker exec -i "$cid" sh -c 'cat > /usr/local/bin/crictl && chmod 0755 /usr/local/bin/crictl && crictl --version >/dev/null' \
    < "$KO_CRICTL"
  # The nodes' bounding set lacks CAP_SYS_RESOURCE too (the engine's wrapper removed it), so a pod that
  # adds it without being privileged (cilium-agent does) would fail in the node's runc with "unable to
  # apply caps: operation not permitted": the node's containerd runs runc through the same wrapper.
  docker exec -i "$cid" sh -c 'mkdir -p /usr/local/lib/netslo && cat > /usr/local/lib/netslo/runc-wrapper && \
    chmod 0755 /usr/local/lib/netslo/runc-wrapper' < "$KO_HERE/runc-wrapper"
  docker exec "$cid" sh -c 'printf "#!/bin/sh\nNETSLO_REAL_RUNC=/usr/sbin/runc exec /usr/local/lib/netslo/runc-wrapper \"\$@\"\n" \
      > /usr/local/sbin/netslo-runc && chmod 0755 /usr/local/sbin/netslo-runc && \
    sed -i "s#^\(\s*\)SystemdCgroup = true#&\n\1BinaryName = \"/usr/local/sbin/netslo-runc\"#" /etc/containerd/config.toml && \
    [ $(grep -c "BinaryName = \"/usr/local/sbin/netslo-runc\"" /etc/containerd/config.toml) = 2 ]'
  docker exec -i "$cid" sh -c 'cat > /usr/local/lib/netslo/snapshots-tmpfs && chmod 0755 /usr/local/lib/netslo/snapshots-tmpfs' \
    < "$KO_HERE/snapshots-tmpfs"
  docker exec "$cid" sh -c "echo NETSLO_NODE_TMPFS_MIN_MB=$NODE_TMPFS_MIN_MB > /etc/default/netslo-snapshots && \
    mkdir -p /etc/systemd/system/containerd.service.d && \
    printf '[Service]\nExecStartPre=/usr/local/lib/netslo/snapshots-tmpfs\n' \
      > /etc/systemd/system/containerd.service.d/netslo-snapshots-tmpfs.conf"
  docker exec "$cid" sh -c "echo $KVER > /kind/version && \
    sed -i 's#^\(\s*sandbox_image\s*=\s*\).*#\1\"$pause\"#' /etc/containerd/config.toml && \
    grep -q 'sandbox_image = \"$pause\"' /etc/containerd/config.toml"
  docker exec "$cid" bash -c 'nohup containerd > /tmp/containerd.log 2>&1 & echo $! > /tmp/containerd.pid
    for i in $(seq 50); do [ -S /run/containerd/containerd.sock ] && ctr version >/dev/null 2>&1 && exit 0; sleep 0.2; done
    cat /tmp/containerd.log; exit 1'
  for f in "$KO_IMAGES"/*.tar "$KO_AGENT_CACHE/agent-base.image.tar"; do
    [[ -f $f.id || -f $f.key ]] || continue   # image archives only (not the cached base layers)
    docker exec -i "$cid" ctr --namespace=k8s.io images import --all-platforms --no-unpack --digests - < "$f" >/dev/null
  done
  docker exec "$cid" ctr --namespace=k8s.io images ls -q | sed 's/^/  imported: /' >&2
  docker exec "$cid" sh -c 'kill $(cat /tmp/containerd.pid); while kill -0 $(cat /tmp/containerd.pid) 2>/dev/null; do sleep 0.1; done; rm -f /tmp/containerd.*'
  docker exec "$cid" sh -c 'c=/var/lib/containerd/io.containerd.content.v1.content && mkdir -p /opt/netslo && \
    mv $c /opt/netslo/containerd-content && ln -s /opt/netslo/containerd-content $c && [ -d $c/blobs/sha256 ]'
  docker commit "$cid" "$KO_NODE_IMAGE-stage" >/dev/null
  local ctx
  ctx=$(mktemp -d)
  printf 'FROM %s\nENV container=docker\nSTOPSIGNAL SIGRTMIN+3\nENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]\nCMD []\nLABEL io.netslo.key=%s io.netslo.kubernetes=%s io.netslo.kind=%s io.netslo.agent-base=%s\n' \
    "$KO_NODE_IMAGE-stage" "$key" "$KVER" "$KIND_VERSION" "$(cat "$KO_AGENT_CACHE/agent-base.image.tar.key" 2>/dev/null)" \
    > "$ctx/Dockerfile"
  DOCKER_BUILDKIT=0 docker build -q -t "$KO_NODE_IMAGE" "$ctx" >/dev/null
  rm -rf "$ctx"; docker rmi "$KO_NODE_IMAGE-stage" >/dev/null
  ko_log "node image: $KO_NODE_IMAGE ready"
}

# ---- netslo agent image ----------------------------------------------------------------------------
agent_image_light() {  # the venv/rootfs base layer is cached: only the small netslo layer is packed
  compgen -G "$KO_AGENT_CACHE/agent-base-*.tar" >/dev/null
}
agent_image() {  # the debootstrap-built agent image (scripts/kind-offline/agent-image.sh), docker-loaded
  local tar=$KO_AGENT_CACHE/agent.tar id
  bash "$KO_HERE/agent-image.sh" build
  id=$(cat "$tar.id")
  if [[ $(docker image inspect -f '{{.Id}}' "$KO_AGENT_IMAGE" 2>/dev/null) != *"${id#sha256:}"* ]]; then
    docker load -i "$tar" >/dev/null
  fi
  ko_log "agent image: $KO_AGENT_IMAGE ($id)"
}
