# shellcheck shell=bash
# Calico for the offline kind cluster, built from a source tree (sourced by scripts/kind-offline.sh).
#
# NETSLO_CALICO_SRC names either a git repository (bare or a checkout) of
# https://github.com/projectcalico/calico holding the tag below, which must resolve to the commit below,
# or a source archive of that tag (.tar.gz or .tar.xz, with or without one top-level folder: GitHub's
# https://github.com/projectcalico/calico/archive/refs/tags/v3.31.3.tar.gz, or a `git archive` of the
# tag), accepted when its sha256 is the pinned one or, whatever its compression and folder, when its
# files are the tag's (CALICO_FILES_TREE below); otherwise nothing is built. The tag's tree
# is exported with "git archive" (its nested module api/ satisfies go.mod's "replace
# github.com/projectcalico/api => ./api"; every other dependency comes from the Go module proxy) and
# built with the local Go toolchain, CGO off:
#   calico-node      node/cmd/calico-node (felix, the iptables/VXLAN dataplane; no eBPF dataplane: its
#                    libbpf is not in the tree, Calico's Makefile clones it) and node/cmd/mountns
#   CNI plugin       cni-plugin/cmd/calico (also calico-ipam, by its name), cni-plugin/cmd/install
#   kube-controllers kube-controllers/cmd/{kube-controllers,check-status,wrapper}
# plus the reference CNI plugins of the node image (github.com/containernetworking/plugins, pinned in
# common.sh). BIRD is not built: netslo's Calico overlay runs the VXLAN backend (calico_backend
# "vxlan"), under which calico-node starts no BGP daemon. The images are packed like the other
# component images (image_pack.py; calico-node on a debootstrap'ed Debian rootfs with the run-time
# packages of the tag's node/Dockerfile.amd64), tagged as the tag's manifests/calico.yaml names them,
# and cached in $KO_IMAGES with an .id file: the node image imports them into every node's containerd
# (imagePullPolicy IfNotPresent finds them; nothing is pulled). The tag's manifests/calico.yaml is
# copied into the CNI mirror ($CNI_MIRROR/calico/<tag>/calico.yaml; `env` exports NETSLO_CNI_MIRROR).
CALICO_VERSION=v3.31.3
CALICO_COMMIT=2e3c880bcabff580ddd7a08340878ede207f37be
# A source archive's content check: the git tree id of the files `git archive` writes for the tag, taken
# as they are (no .gitattributes, eol conversion or filters). It is not the commit's tree
# (a27c447cf441515ba0123f8cc1a4f2cf44749666): on export .gitattributes turns 13 Windows scripts to
# CRLF line ends. Verified 2026-11-26: `git archive v3.31.3` of the upstream repository gives this id.
CALICO_FILES_TREE=c70e771c259d9649cae23cebca261fd6564e2a2d
# sha256 of the tag's `git archive` compressed with xz -6 (3,761,456 bytes): the copy CI is given
CALICO_ARCHIVE_SHA256=449f2f41c88d48e31d16fd37d79ac539181b70d5ed00aff11e2292c62e9b496e
CALICO_RECIPE=2     # bump when the image recipe below changes (cached images are rebuilt)
CALICO_DIR=$KO_CACHE/calico
CALICO_SRC_DIR=$CALICO_DIR/src-$CALICO_COMMIT
CALICO_BIN=$CALICO_DIR/bin-$CALICO_COMMIT
# calico-node's run-time packages: what node/Dockerfile.amd64 installs (iptables legacy+nft, ipset,
# conntrack, iproute2 with tc, kmod, procps, net-tools, iputils, which, findutils) and runit (start_runit
# runs runsvdir; svlogd writes the service logs). Debian bookworm's runit is 2.1.2, the version the
# Dockerfile builds.
CALICO_NODE_DEBS=iptables,ipset,conntrack,iproute2,kmod,procps,net-tools,iputils-ping,nftables,runit
CNI_MIRROR=${NETSLO_CNI_MIRROR:-$KO_CACHE/cni-mirror}

calico_image_file() { echo "$KO_IMAGES/calico-$1-$CALICO_VERSION.tar"; }   # node|cni|kube-controllers

calico_build_cached() {
  local c
  for c in node cni kube-controllers; do [[ -f $(calico_image_file $c).id ]] || return 1; done
  [[ $(cat "$CALICO_DIR/images.recipe" 2>/dev/null) == "$CALICO_RECIPE $CALICO_COMMIT" && -f $(calico_mirror_file) ]]
}

calico_build_light() { [[ -z ${NETSLO_CALICO_SRC:-} ]]; }   # nothing to build: only says so

calico_files_tree() {  # DIR -> git tree id of the files in DIR as they are (see CALICO_FILES_TREE)
  local g
  g=$(mktemp -d)
  git init -q --bare "$g"
  printf '* -text -eol -filter -ident -export-subst\n' > "$g/info/attributes"
  GIT_DIR=$g GIT_WORK_TREE=$1 GIT_INDEX_FILE=$g/index git -c core.autocrlf=false -c core.safecrlf=false add -A -f
  GIT_DIR=$g GIT_INDEX_FILE=$g/index git write-tree
  rm -rf "$g"
}

calico_unpack() {  # ARCHIVE DIR: the archive's files into DIR (created), one top-level folder stripped
  local entries
  mkdir -p "$2"
  tar -xf "$1" -C "$2" 2>/dev/null || return 1
  entries=$(ls -A "$2")
  if [[ -n $entries && $entries != *$'\n'* && -d $2/$entries ]]; then
    mv "$2/$entries" "$2.strip" && rmdir "$2" && mv "$2.strip" "$2"
  fi
}

calico_archive_ok() {  # ARCHIVE DIR: unpack into DIR and say why it is the tag's source, else fail
  local sum tree
  sum=$(sha256sum < "$1" | cut -c1-64)
  calico_unpack "$1" "$2" || { ko_log "calico: REFUSED: $1 is not a tar archive tar can read"; return 1; }
  if [[ $sum == "$CALICO_ARCHIVE_SHA256" ]]; then
    ko_log "calico: $1: sha256 $sum is the pinned archive's"
    return 0
  fi
  tree=$(calico_files_tree "$2")
  if [[ $tree == "$CALICO_FILES_TREE" ]]; then
    ko_log "calico: $1: sha256 $sum not pinned, but its files are tag $CALICO_VERSION's (tree $tree)"
    return 0
  fi
  ko_log "calico: REFUSED: $1 (sha256 $sum) is not the pinned archive and its files are not tag $CALICO_VERSION's (tree $tree, expected $CALICO_FILES_TREE)"
  return 1
}

calico_src() {  # -> NETSLO_CALICO_SRC: a repository checked to hold the pinned tag, or an archive file
  local src=${NETSLO_CALICO_SRC:-} got
  if [[ -z $src ]]; then
    ko_log "calico: NETSLO_CALICO_SRC is not set (a git repository of https://github.com/projectcalico/calico with tag $CALICO_VERSION, or its source archive); not built"
    return 1
  fi
  if [[ -f $src ]]; then echo "$src"; return 0; fi   # an archive: checked by calico_export before use
  got=$(git -C "$src" rev-parse -q --verify "refs/tags/$CALICO_VERSION^{commit}" 2>/dev/null) || got="missing"
  if [[ $got != "$CALICO_COMMIT" ]]; then
    ko_log "calico: REFUSED: tag $CALICO_VERSION in $src is $got, expected $CALICO_COMMIT"
    return 1
  fi
  echo "$src"
}

calico_export() {  # the tag's tree (git archive of a repository, or a verified archive) -> $CALICO_SRC_DIR
  [[ -f $CALICO_SRC_DIR/.done ]] && return
  rm -rf "$CALICO_SRC_DIR" "$CALICO_SRC_DIR.tmp"
  if [[ -f $1 ]]; then
    calico_archive_ok "$1" "$CALICO_SRC_DIR.tmp" || { rm -rf "$CALICO_SRC_DIR.tmp"; return 1; }
  else
    mkdir -p "$CALICO_SRC_DIR.tmp"
    git -C "$1" archive "$CALICO_COMMIT" | tar -x -C "$CALICO_SRC_DIR.tmp"
  fi
  [[ -f $CALICO_SRC_DIR.tmp/api/go.mod ]] || ko_die "calico: the tree of $CALICO_VERSION has no api/go.mod"
  grep -q 'github.com/projectcalico/api => ./api' "$CALICO_SRC_DIR.tmp/go.mod" \
    || ko_die "calico: go.mod of $CALICO_VERSION does not replace github.com/projectcalico/api with ./api"
  touch "$CALICO_SRC_DIR.tmp/.done"; mv "$CALICO_SRC_DIR.tmp" "$CALICO_SRC_DIR"
}

calico_go() {  # OUT-DIR PACKAGE...: go build with Calico's version stamps (lib.Makefile's LDFLAGS)
  local out=$1 b=github.com/projectcalico/calico/pkg/buildinfo; shift
  mkdir -p "$out"
  (cd "$CALICO_SRC_DIR" && CGO_ENABLED=0 nice -n 19 go build -trimpath -o "$out/" \
    -ldflags "-s -w -X $b.Version=$CALICO_VERSION -X $b.GitRevision=$CALICO_COMMIT -X $b.BuildDate=$(date -u +%FT%TZ)" \
    "$@")
}

calico_binaries() {
  [[ -f $CALICO_BIN/.done ]] && return
  rm -rf "$CALICO_BIN.tmp"
  ko_log "calico: go build calico-node (node/cmd/calico-node, node/cmd/mountns), CGO off"
  ko_subtimed calico-go-calico-node calico_go "$CALICO_BIN.tmp" ./node/cmd/calico-node ./node/cmd/mountns
  ko_log "calico: go build CNI plugin (cni-plugin/cmd/calico, cni-plugin/cmd/install)"
  ko_subtimed calico-go-cni calico_go "$CALICO_BIN.tmp" ./cni-plugin/cmd/calico ./cni-plugin/cmd/install
  ko_log "calico: go build kube-controllers (kube-controllers/cmd/{kube-controllers,check-status,wrapper})"
  ko_subtimed calico-go-kube-controllers calico_go "$CALICO_BIN.tmp" ./kube-controllers/cmd/kube-controllers \
    ./kube-controllers/cmd/check-status ./kube-controllers/cmd/wrapper
  grep -qE "^Version: +$CALICO_VERSION\$" <<<"$("$CALICO_BIN.tmp/calico-node" -v)" \
    || ko_die "calico: the built calico-node -v says '$("$CALICO_BIN.tmp/calico-node" -v)', not Version $CALICO_VERSION"
  touch "$CALICO_BIN.tmp/.done"; rm -rf "$CALICO_BIN"; mv "$CALICO_BIN.tmp" "$CALICO_BIN"
}

calico_ref() {  # node|cni|kube-controllers -> the image reference the tag's manifest uses
  local ref
  ref=$(grep -oE "image: *[^ ]*/calico/$1:$CALICO_VERSION\$" "$CALICO_SRC_DIR/manifests/calico.yaml" \
    | sed 's/^image: *//' | sort -u)
  [[ $(wc -w <<<"$ref") == 1 ]] || ko_die "calico: manifests/calico.yaml names '$ref' for calico/$1"
  echo "$ref"
}

calico_node_base() {  # -> CALICO_NODE_BASE: cached Debian layer with calico-node's run-time packages
  CALICO_NODE_BASE=$CALICO_DIR/node-base-$(echo "1 $SUITE $CALICO_NODE_DEBS" | sha256sum | cut -c1-16).layer.tar
  debian_layer "$CALICO_NODE_BASE" "$CALICO_DIR/debootstrap-node.log" "$CALICO_NODE_DEBS" \
    usr/bin/runsvdir usr/sbin/iptables-legacy usr/sbin/iptables-nft
}

calico_pack() {  # NAME STAGE-DIR ARGS...: STAGE-DIR as the top layer of calico/NAME, extra image args
  local name=$1 stage=$2 out layer; shift 2
  out=$(calico_image_file "$name"); layer=$CALICO_DIR/$name.layer.tar
  "${PACK[@]}" layer "$stage" "$layer"
  "${PACK[@]}" image --tag "$(calico_ref "$name")" "$@" --layer "$layer" "$out.tmp" > "$out.id.tmp"
  mv "$out.tmp" "$out"; mv "$out.id.tmp" "$out.id"; rm -f "$layer" "$layer.sha256"
  ko_log "calico: image $(calico_ref "$name") -> $out ($(du -m "$out" | cut -f1) MB)"
}

calico_images() {
  local stage cni
  cni=$KO_CNI_BIN
  stage=$(mktemp -d); chmod 0755 "$stage"
  # shellcheck disable=SC2064  # runs in ko_heavy's subshell
  trap "rm -rf $stage" EXIT
  # calico/node: Debian base + calico-node (setuid, as upstream) + the tag's node/filesystem (runit
  # services, rc.local, felix.cfg; start_runit and helpers into /usr/sbin). No BIRD, no bpftool.
  calico_node_base
  mkdir -p "$stage/node/usr/bin" "$stage/node/usr/sbin"
  cp -r "$CALICO_SRC_DIR/node/filesystem/etc" "$stage/node/"
  install -m 0755 "$CALICO_SRC_DIR"/node/filesystem/sbin/* "$stage/node/usr/sbin/"
  install -m 4755 "$CALICO_BIN/calico-node" "$CALICO_BIN/mountns" "$stage/node/usr/bin/"
  chmod -R go-w "$stage/node"
  # FELIX_DebugSkipCTLBCleanup: with BPF off felix first removes a leftover connect-time load balancer,
  # which needs libbpf; built without it (CGO off) that call panics ("LIBBPF syscall stub") and felix
  # never gets ready. This variable (felix/bpf/nat/connecttime.go) skips that cleanup; nothing of
  # Calico's eBPF mode ever ran on these nodes, so there is nothing to clean.
  calico_pack node "$stage/node" --layer "$CALICO_NODE_BASE" --env SVDIR=/etc/service/enabled \
    --env FELIX_DebugSkipCTLBCleanup=true \
    --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --cmd '["start_runit"]'
  # calico/cni: the plugin (calico-ipam is the same binary under another name), the installer and the
  # reference plugins upstream's image carries (host-local, loopback, portmap, tuning) plus bandwidth.
  mkdir -p "$stage/cni/opt/cni/bin" "$stage/cni/tmp"; chmod 1777 "$stage/cni/tmp"
  install -m 0755 "$CALICO_BIN/calico" "$CALICO_BIN/install" "$cni"/{host-local,loopback,portmap,tuning,bandwidth} \
    "$stage/cni/opt/cni/bin/"
  ln -s calico "$stage/cni/opt/cni/bin/calico-ipam"
  calico_pack cni "$stage/cni" --env PATH=/opt/cni/bin:/usr/sbin:/usr/bin:/sbin:/bin --workdir /opt/cni/bin \
    --cmd '["/opt/cni/bin/install"]'
  # calico/kube-controllers: runs as user 999 (the manifest says runAsNonRoot); its status and
  # profile files are world-writable here (image_pack writes every file as root-owned).
  mkdir -p "$stage/kc/usr/bin" "$stage/kc/status" "$stage/kc/profiles" "$stage/kc/tmp"; chmod 1777 "$stage/kc/tmp"
  install -m 0755 "$CALICO_BIN"/{kube-controllers,check-status,wrapper} "$stage/kc/usr/bin/"
  install -m 0666 /dev/null "$stage/kc/status/status.json"
  install -m 0666 /dev/null "$stage/kc/profiles/mem.pprof"; install -m 0666 /dev/null "$stage/kc/profiles/cpu.pprof"
  calico_pack kube-controllers "$stage/kc" --env PATH=/usr/bin:/bin --user 999 \
    --entrypoint '["/usr/bin/wrapper", "/usr/bin/kube-controllers"]'
}

calico_mirror_file() { echo "$CNI_MIRROR/calico/$CALICO_VERSION/calico.yaml"; }
calico_mirror() {  # the tag's manifest into the CNI mirror, checked against netslo's recorded digest
  local want got f
  f=$(calico_mirror_file)
  want=$(sed -n 's/^ *sha256: *\([0-9a-f]\{64\}\).*/\1/p' "$KO_REPO/netslo/providers/cni/calico.yaml")
  got=$(sha256sum < "$CALICO_SRC_DIR/manifests/calico.yaml" | cut -c1-64)
  [[ $got == "$want" ]] || ko_die "calico: manifests/calico.yaml of $CALICO_VERSION has sha256 $got, netslo records $want"
  mkdir -p "${f%/*}"; cp "$CALICO_SRC_DIR/manifests/calico.yaml" "$f.tmp"; mv "$f.tmp" "$f"
}

calico_build() {
  local src
  rm -f "$KO_CACHE/calico.blocked"   # left by the module-proxy attempt of earlier versions
  src=$(calico_src) || return 1
  ko_log "calico: $CALICO_VERSION ($CALICO_COMMIT) from $src"
  ko_subtimed calico-export calico_export "$src" || return 1
  calico_binaries
  ko_subtimed calico-images calico_images
  echo "$CALICO_RECIPE $CALICO_COMMIT" > "$CALICO_DIR/images.recipe"
  calico_mirror
}

calico_manifest_dir() {  # the CNI mirror directory (NETSLO_CNI_MIRROR), if it holds any file
  [[ -d $CNI_MIRROR ]] && [[ -n $(find "$CNI_MIRROR" -type f -print -quit) ]] && echo "$CNI_MIRROR"
}

calico_status() {
  local c have=()
  for c in node cni kube-controllers; do [[ -f $(calico_image_file $c).id ]] && have+=("calico/$c:$CALICO_VERSION"); done
  if ((${#have[@]} == 3)); then
    echo "calico: images ${have[*]} (imported into the node image by build/up), built from $CALICO_COMMIT"
  else
    echo "calico: not built (NETSLO_CALICO_SRC=${NETSLO_CALICO_SRC:-unset})"
  fi
}
