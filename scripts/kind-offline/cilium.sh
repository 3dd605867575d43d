# shellcheck shell=bash
# Cilium for the offline kind cluster, built from the Go module proxy (sourced by scripts/kind-offline.sh).
#
# Opt-in: NETSLO_CILIUM=1 (the agent's build takes minutes and its image carries clang); without it
# nothing of Cilium is built and `status` says so.
#
# Source: the module github.com/cilium/cilium@v1.20.2 (the proxy's only 1.x version; its zip is the
# tag's tree without nested modules: daemon, operator, plugins, bpf/ and the Helm chart
# install/kubernetes/cilium). `go` checks the zip against sum.golang.org; the h1 sum below is checked
# too. The tree is copied to $CILIUM_SRC_DIR and its go.mod gets two replaces, both because the module
# proxy does not serve a version go.mod asks for (403 "This module version is not available"):
#   github.com/osrg/gobgp/v4 v4.6.1-0.20260630022313-d6dee8360046 -> v4.8.0 (the proxy's only v4
#     version; gobgp is the BGP control plane's library, which netslo's values leave off)
#   sigs.k8s.io/mcs-api/controllers v0.5.2 -> a local stand-in module with the one name the operator's
#     non-test code uses, the constant DerivedServiceAnnotation (value as Cilium's
#     Documentation/network/clustermesh/mcsapi.rst states it; only used with ClusterMesh MCS-API, off)
# Built with the local Go toolchain (go.mod: go 1.26.0), CGO off, tag osusergo, version stamp as
# Makefile.defs sets it (pkg/version.ciliumVersion):
#   agent image     cilium-agent (daemon), cilium-dbg (+ the name cilium, which the probes call),
#                   cilium-health, cilium-health-responder, cilium-mount (tools/mount),
#                   cilium-sysctlfix (tools/sysctlfix), cilium-cni (plugins/cilium-cni); the tree's
#                   images/cilium/init-container.sh, plugins/cilium-cni/{install-plugin,cni-uninstall}.sh
#                   and bpf/ in /var/lib/cilium/bpf (what `make install-bpf` copies), on a Debian
#                   bookworm minbase with images/runtime/install-runtime-deps.sh's packages and clang-19
#                   (the agent compiles its datapath at run time with `clang`)
#   operator image  cilium-operator-generic (operator, tag ipam_provider_operator)
#   helm            helm.sh/helm/v3 (the installer runs `helm upgrade --install`), into $KO_BIN
# Not built: Envoy (cilium-envoy is another repository; netslo's values say envoy.enabled=false,
# l7Proxy=false), Hubble relay/UI, clustermesh-apiserver, bugtool, bpftool, the iptables-wrapper of
# upstream's runtime image (Debian's iptables defaults to the nft backend, as the node and kube-proxy).
# Images are tagged as the chart's values name them (quay.io/cilium/cilium:v1.20.2,
# quay.io/cilium/operator-generic:v1.20.2; the module's chart has useDigest false and no digests) and
# imported into the node image like the other component images. The chart directory is packed with
# the built helm into the CNI mirror as cilium/1.20.2/cilium-1.20.2.tgz (the file name of
# netslo/providers/cni/cilium.yaml's URL). A local pack is not helm.cilium.io's file and is not byte-for-byte
# reproducible (helm writes the time into the archive): beside it goes a record <file>.local-build
# ("sha256 <digest>" and where it was built from), which netslo checks the pack against instead of the
# published file's recorded digest, and a run with it reports "local build".
CILIUM_VERSION=1.20.2
CILIUM_MODULE=github.com/cilium/cilium
CILIUM_SUM=h1:dqiEGIcXc+gqCLYG/l7VCFJ8GHyb4HUrwbZOpkX5dL8=
CILIUM_TIME=2026-09-15T20:03:11Z    # the module's .info time (the tag's), in the version stamp
CILIUM_GOBGP=v4.8.0
HELM_VERSION=v3.19.2
CILIUM_RECIPE=1     # bump when the image recipe below changes (cached images are rebuilt)
CILIUM_DIR=$KO_CACHE/cilium
CILIUM_SRC_DIR=$CILIUM_DIR/src-v$CILIUM_VERSION
CILIUM_BIN=$CILIUM_DIR/bin-v$CILIUM_VERSION
# images/runtime/install-runtime-deps.sh's packages (bash-completion left out) and clang-19 (bookworm's
# newest clang; upstream's runtime copies its own clang build). util-linux (nsenter, mount) is in minbase.
CILIUM_AGENT_DEBS=iproute2,iptables,ipset,kmod,ca-certificates,libatomic1,clang-19
CNI_MIRROR=${NETSLO_CNI_MIRROR:-$KO_CACHE/cni-mirror}

cilium_wanted() { [[ ${NETSLO_CILIUM:-} == 1 ]]; }
cilium_image_file() { echo "$KO_IMAGES/cilium-$1-v$CILIUM_VERSION.tar"; }   # agent|operator
cilium_mirror_file() { echo "$CNI_MIRROR/cilium/$CILIUM_VERSION/cilium-$CILIUM_VERSION.tgz"; }

cilium_build_light() { ! cilium_wanted; }   # nothing to build: only says so
cilium_build_cached() {
  [[ -f $(cilium_image_file agent).id && -f $(cilium_image_file operator).id && -x $KO_BIN/helm \
     && $(cat "$KO_BIN/.helm-recipe" 2>/dev/null) == "$HELM_VERSION k8s 1.34" \
     && -f $(cilium_mirror_file) && -f $(cilium_mirror_file).local-build \
     && $(cat "$CILIUM_DIR/images.recipe" 2>/dev/null) == "$CILIUM_RECIPE $CILIUM_VERSION" ]]
}

cilium_src() {  # the module zip (checked) -> $CILIUM_SRC_DIR with go.mod's two replaces
  [[ -f $CILIUM_SRC_DIR/.done ]] && return
  local info dir sum stub
  info=$(cd "$KO_CACHE" && nice -n 19 go mod download -json "$CILIUM_MODULE@v$CILIUM_VERSION")
  dir=$(jq -r .Dir <<<"$info"); sum=$(jq -r .Sum <<<"$info")
  [[ $sum == "$CILIUM_SUM" ]] || ko_die "cilium: $CILIUM_MODULE@v$CILIUM_VERSION has sum $sum, expected $CILIUM_SUM"
  [[ $(cat "$dir/VERSION") == "$CILIUM_VERSION" ]] || ko_die "cilium: VERSION of the module is $(cat "$dir/VERSION")"
  rm -rf "$CILIUM_SRC_DIR" "$CILIUM_SRC_DIR.tmp"; mkdir -p "$CILIUM_DIR"
  cp -r "$dir" "$CILIUM_SRC_DIR.tmp"; chmod -R u+w "$CILIUM_SRC_DIR.tmp"
  stub=$CILIUM_SRC_DIR.tmp/.netslo/mcs-api-controllers   # a directory with a go.mod: not in the main module
  mkdir -p "$stub"
  printf 'module sigs.k8s.io/mcs-api/controllers\n\ngo 1.24\n' > "$stub/go.mod"
  cat > "$stub/controllers.go" <<'EOF'
// Package controllers stands in for sigs.k8s.io/mcs-api/controllers v0.5.2, which the Go module
// proxy does not serve, in netslo's offline build: only the name cilium-operator's non-test code uses.
package controllers

// DerivedServiceAnnotation is the ServiceImport annotation that names the derived Service.
const DerivedServiceAnnotation = "multicluster.kubernetes.io/derived-service"
EOF
  (cd "$CILIUM_SRC_DIR.tmp" &&
    go mod edit -replace "github.com/osrg/gobgp/v4=github.com/osrg/gobgp/v4@$CILIUM_GOBGP" \
      -replace "sigs.k8s.io/mcs-api/controllers=./.netslo/mcs-api-controllers")
  touch "$CILIUM_SRC_DIR.tmp/.done"; mv "$CILIUM_SRC_DIR.tmp" "$CILIUM_SRC_DIR"
}

cilium_go() {  # OUT TAGS PACKAGE: go build as Makefile.defs does (CGO off, osusergo, version stamp)
  (cd "$CILIUM_SRC_DIR" && CGO_ENABLED=0 nice -n 19 go build -trimpath -tags "osusergo$2" -o "$1" \
    -ldflags "-s -w -X 'github.com/cilium/cilium/pkg/version.ciliumVersion=$CILIUM_VERSION go-module-v$CILIUM_VERSION $CILIUM_TIME'" \
    "$3")
}

cilium_tools() {  # OUT-DIR: the agent image's other binaries
  cilium_go "$1/cilium-dbg" "" ./cilium-dbg
  cilium_go "$1/cilium-health" "" ./cilium-health
  cilium_go "$1/cilium-health-responder" "" ./cilium-health/responder
  cilium_go "$1/cilium-mount" "" ./tools/mount
  cilium_go "$1/cilium-sysctlfix" "" ./tools/sysctlfix
  cilium_go "$1/cilium-cni" "" ./plugins/cilium-cni
}

cilium_binaries() {
  [[ -f $CILIUM_BIN/.done ]] && return
  local t=$CILIUM_BIN.tmp
  rm -rf "$t"; mkdir -p "$t"
  ko_log "cilium: go build cilium-agent (daemon), CGO off"
  ko_subtimed cilium-go-agent cilium_go "$t/cilium-agent" "" ./daemon
  ko_log "cilium: go build cilium-dbg, cilium-health(-responder), cilium-mount, cilium-sysctlfix, cilium-cni"
  ko_subtimed cilium-go-tools cilium_tools "$t"
  ko_log "cilium: go build cilium-operator-generic (operator, ipam_provider_operator)"
  ko_subtimed cilium-go-operator cilium_go "$t/cilium-operator-generic" ",ipam_provider_operator" ./operator
  grep -q " $CILIUM_VERSION go-module-v$CILIUM_VERSION " <<<"$("$t/cilium-agent" --version)" \
    || ko_die "cilium: the built cilium-agent --version says '$("$t/cilium-agent" --version)'"
  touch "$t/.done"; rm -rf "$CILIUM_BIN"; mv "$t" "$CILIUM_BIN"
}

cilium_helm() {  # helm.sh/helm/v3 -> $KO_BIN/helm, ldflags as helm's Makefile sets them
  local stamp="$HELM_VERSION k8s 1.34"   # client-go v0.34.0 in helm's go.mod: Kubernetes 1.34 when no cluster is asked
  [[ -x $KO_BIN/helm && $(cat "$KO_BIN/.helm-recipe" 2>/dev/null) == "$stamp" ]] && return
  ko_log "cilium: go install helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
  mkdir -p "$KO_BIN/helm.tmp"
  CGO_ENABLED=0 GOBIN=$KO_BIN/helm.tmp nice -n 19 go install -trimpath -ldflags "-s -w \
    -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION \
    -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=34 \
    -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=34" \
    "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
  mv "$KO_BIN/helm.tmp/helm" "$KO_BIN/helm"; rmdir "$KO_BIN/helm.tmp"
  echo "$stamp" > "$KO_BIN/.helm-recipe"
}

cilium_agent_base() {  # -> CILIUM_AGENT_BASE: cached Debian layer with the agent's run-time packages
  CILIUM_AGENT_BASE=$CILIUM_DIR/agent-base-$(echo "1 $SUITE $CILIUM_AGENT_DEBS" | sha256sum | cut -c1-16).layer.tar
  debian_layer "$CILIUM_AGENT_BASE" "$CILIUM_DIR/debootstrap-agent.log" "$CILIUM_AGENT_DEBS" \
    usr/lib/llvm-19/bin/clang usr/bin/nsenter usr/sbin/ipset
}

cilium_pack() {  # NAME REF STAGE-DIR ARGS...: STAGE-DIR as the top layer of the image REF
  local name=$1 ref=$2 stage=$3 out layer; shift 3
  out=$(cilium_image_file "$name"); layer=$CILIUM_DIR/$name.layer.tar
  "${PACK[@]}" layer "$stage" "$layer"
  "${PACK[@]}" image --tag "$ref" "$@" --layer "$layer" "$out.tmp" > "$out.id.tmp"
  mv "$out.tmp" "$out"; mv "$out.id.tmp" "$out.id"; rm -f "$layer" "$layer.sha256"
  ko_log "cilium: image $ref -> $out ($(du -m "$out" | cut -f1) MB)"
}

cilium_ref() {  # agent|operator -> the image the chart's values name (repository, suffix, tag)
  local v=$CILIUM_SRC_DIR/install/kubernetes/cilium/values.yaml repo tag
  case $1 in
    agent) repo=$(awk '/^image:/{p=1} p&&/^  repository:/{print $2; exit}' "$v")
           tag=$(awk '/^image:/{p=1} p&&/^  tag:/{print $2; exit}' "$v") ;;
    operator) repo=$(awk '/^operator:/{p=1} p&&/^    repository:/{print $2; exit}' "$v")-generic
           tag=$(awk '/^operator:/{p=1} p&&/^    tag:/{print $2; exit}' "$v") ;;
  esac
  repo=${repo//\"/}; tag=${tag//\"/}
  [[ $repo == quay.io/cilium/* && $tag == "v$CILIUM_VERSION" ]] || ko_die "cilium: values.yaml names '$repo:$tag' for $1"
  echo "$repo:$tag"
}

cilium_images() {
  local stage cni f
  cni=$KO_CNI_BIN
  stage=$(mktemp -d); chmod 0755 "$stage"
  # shellcheck disable=SC2064  # runs in ko_heavy's subshell
  trap "rm -rf $stage" EXIT
  cilium_agent_base
  # cilium/cilium: what the tree's images/cilium/Dockerfile puts on its runtime image (no Envoy).
  mkdir -p "$stage/a/usr/bin" "$stage/a/usr/local/bin" "$stage/a/opt/cni/bin" "$stage/a/cni" \
    "$stage/a/var/lib/cilium" "$stage/a/home/cilium"
  install -m 0755 "$CILIUM_BIN"/{cilium-agent,cilium-dbg,cilium-health,cilium-health-responder,cilium-mount,cilium-sysctlfix} \
    "$stage/a/usr/bin/"
  ln -s cilium-dbg "$stage/a/usr/bin/cilium"
  install -m 0755 "$CILIUM_BIN/cilium-cni" "$stage/a/opt/cni/bin/"
  install -m 0755 "$cni/loopback" "$stage/a/cni/"   # install-plugin.sh copies it if the node has none
  install -m 0755 "$CILIUM_SRC_DIR/images/cilium/init-container.sh" \
    "$CILIUM_SRC_DIR/plugins/cilium-cni/install-plugin.sh" "$CILIUM_SRC_DIR/plugins/cilium-cni/cni-uninstall.sh" "$stage/a/"
  ln -s ../../lib/llvm-19/bin/clang "$stage/a/usr/local/bin/clang"   # the loader runs "clang"
  # bpf/ as `make install-bpf` copies it (Makefile.defs' BPF_SRCFILES_IGNORE left out)
  (cd "$CILIUM_SRC_DIR" && find bpf -type f ! -path 'bpf/tests/*' ! -path 'bpf/complexity-tests/*' \
      ! -path 'bpf/custom/*' ! -name Makefile ! -name Makefile.bpf ! -name .gitignore -print0 \
    | while IFS= read -r -d '' f; do install -D -m 0644 "$f" "$stage/a/var/lib/cilium/$f"; done)
  chmod -R go-w "$stage/a"
  cilium_pack agent "$(cilium_ref agent)" "$stage/a" --layer "$CILIUM_AGENT_BASE" --env INITSYSTEM=SYSTEMD \
    --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --workdir /home/cilium \
    --cmd '["/usr/bin/cilium-dbg"]'
  # cilium/operator-generic: the one binary (the chart's command names it).
  mkdir -p "$stage/o/usr/bin" "$stage/o/tmp"; chmod 1777 "$stage/o/tmp"
  install -m 0755 "$CILIUM_BIN/cilium-operator-generic" "$stage/o/usr/bin/"
  cilium_pack operator "$(cilium_ref operator)" "$stage/o" --env PATH=/usr/bin:/bin \
    --entrypoint '["/usr/bin/cilium-operator-generic"]'
}

cilium_chart() {  # the module's chart dir, packed with the built helm, into the CNI mirror
  local f want
  f=$(cilium_mirror_file)
  want=$(sed -n 's#^ *url: *\(.*\)$#\1#p' "$KO_REPO/netslo/providers/cni/cilium.yaml")
  [[ ${want##*/} == "${f##*/}" ]] || ko_die "cilium: netslo/providers/cni/cilium.yaml's URL names ${want##*/}, the mirror file is ${f##*/}"
  mkdir -p "${f%/*}"
  "$KO_BIN/helm" package "$CILIUM_SRC_DIR/install/kubernetes/cilium" -d "${f%/*}" >/dev/null
  [[ -f $f ]] || ko_die "cilium: helm package made no ${f##*/}"
  cilium_chart_record
  ko_log "cilium: chart -> $f (sha256 $(sha256sum < "$f" | cut -c1-64); a local pack, not helm.cilium.io's file)"
}

cilium_chart_record() {  # <pack>.local-build: its digest and provenance (netslo.providers.cni.local_build)
  local f
  f=$(cilium_mirror_file)
  printf 'sha256 %s\nhelm package of %s@v%s (%s) install/kubernetes/cilium, by kind-offline\n' \
    "$(sha256sum < "$f" | cut -c1-64)" "$CILIUM_MODULE" "$CILIUM_VERSION" "$CILIUM_SUM" > "$f.local-build"
}

cilium_build() {
  if ! cilium_wanted; then ko_log "cilium: NETSLO_CILIUM is not 1; not built"; return 0; fi
  ko_log "cilium: $CILIUM_MODULE@v$CILIUM_VERSION from the Go module proxy"
  ko_subtimed cilium-src cilium_src
  cilium_binaries
  ko_subtimed cilium-helm cilium_helm
  if ! [[ -f $(cilium_image_file agent).id && -f $(cilium_image_file operator).id \
          && $(cat "$CILIUM_DIR/images.recipe" 2>/dev/null) == "$CILIUM_RECIPE $CILIUM_VERSION" ]]; then
    ko_subtimed cilium-images cilium_images
    echo "$CILIUM_RECIPE $CILIUM_VERSION" > "$CILIUM_DIR/images.recipe"
  fi
  [[ -f $(cilium_mirror_file) ]] || ko_subtimed cilium-chart cilium_chart   # kept: a new pack has a new digest
  [[ -f $(cilium_mirror_file).local-build ]] || cilium_chart_record           # a pack made before records
}

cilium_status() {
  local c have=()
  for c in agent operator; do [[ -f $(cilium_image_file $c).id ]] && have+=("$c"); done
  if ((${#have[@]} == 2)); then
    echo "cilium: images $(cilium_ref agent 2>/dev/null) $(cilium_ref operator 2>/dev/null) (imported into the node image by build/up), helm $([[ -x $KO_BIN/helm ]] && echo "$HELM_VERSION" || echo missing), chart $(cilium_mirror_file)"
  else
    echo "cilium: not built (NETSLO_CILIUM=${NETSLO_CILIUM:-unset})"
  fi
}
