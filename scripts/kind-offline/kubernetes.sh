#!/usr/bin/env bash
# Kubernetes and etcd for the kind node image, built from the Go module proxy, cached by version.
#
#   scripts/kind-offline/kubernetes.sh               Kubernetes <KVER> (+ pause), what is missing
#   scripts/kind-offline/kubernetes.sh etcd VERSION  etcd VERSION (the one kubeadm asks for)
#
# Output: $NETSLO_K8S_CACHE/k8s-<KVER>/bin/{kube-apiserver,kube-controller-manager,kube-scheduler,
#         kubelet,kube-proxy,kubectl,kubeadm,pause} and $NETSLO_K8S_CACHE/etcd-<VERSION>/bin/etcd.
# A version directory is complete only when its ".done" stamp exists, so an interrupted build is redone;
# a complete directory that lacks a component added later (e.g. kubeadm) gets only that one built.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=scripts/kind-offline/versions.sh
. "$HERE/versions.sh"

log() { printf '[kubernetes build] %s\n' "$*" >&2; }

export CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local
NICE=(nice -n 19)
JOBS=${NETSLO_BUILD_JOBS:-2}

# throwaway_gomod MODULE VERSION PATTERN TO: a go.mod in the current directory requiring MODULE@VERSION,
# with each replace of MODULE's own go.mod that matches PATTERN (a local "=> ./dir", which works only
# inside its repository) pointed at the published version TO instead.
throwaway_gomod() {
  local module=$1 version=$2 pattern=$3 to=$4 gomod
  gomod=$(go mod download -json "$module@$version" | python3 -c 'import json,sys;print(json.load(sys.stdin)["GoMod"])')
  {
    printf 'module netslo.local/build\n\ngo 1.24\n\nrequire %s %s\n\n' "$module" "$version"
    grep -E "$pattern" "$gomod" | awk -v v="$to" '{print "replace " $1 " => " $1 " " v}'
  } > go.mod
}

build_kubernetes() {
  local out="$K8S_DIR" work c want=()
  if [[ -f "$out/.done" ]]; then
    for c in "${K8S_COMPONENTS[@]}"; do [[ -x $out/bin/$c ]] || want+=("$c"); done
    if ((${#want[@]} == 0)); then log "kubernetes $KVER cached in $out"; return; fi
    log "kubernetes $KVER cached in $out; building the missing ${want[*]}"
    rm -f "$out/.done"
  else
    want=("${K8S_COMPONENTS[@]}")
    log "building kubernetes $KVER (several minutes on 2 cores)"
    rm -rf "$out"
  fi
  work="$NETSLO_K8S_CACHE/work-k8s-$KVER"
  rm -rf "$work"; mkdir -p "$work" "$out/bin"
  cd "$work"
  # k8s.io/kubernetes pins its staging modules with "=> ./staging/..." replaces, which only work
  # inside its own repo; re-point each at the published v0.x version.
  throwaway_gomod k8s.io/kubernetes "$KVER" '^\s*k8s\.io/[a-z0-9-]+ => \./staging/' "$STAGING_VER"
  log "go.mod has $(grep -c '^replace' go.mod) staging replaces"
  local pkgs=()
  for c in "${want[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
  # "@version" on every package: a bare "go get" would upgrade k8s.io/kubernetes to the newest release.
  local p getargs=()
  for p in "${pkgs[@]}"; do getargs+=("$p@$KVER"); done
  "${NICE[@]}" go get "${getargs[@]}" >/dev/null 2>&1 || "${NICE[@]}" go get "${getargs[@]}"
  grep -q "k8s.io/kubernetes $KVER" go.mod || { log "go.mod does not pin k8s.io/kubernetes $KVER"; exit 1; }
  local ld="-s -w -X k8s.io/component-base/version.gitVersion=$KVER -X k8s.io/component-base/version.gitMajor=$KMAJOR -X k8s.io/component-base/version.gitMinor=$KMINOR -X k8s.io/component-base/version.gitTreeState=clean -X k8s.io/client-go/pkg/version.gitVersion=$KVER -X k8s.io/client-go/pkg/version.gitMajor=$KMAJOR -X k8s.io/client-go/pkg/version.gitMinor=$KMINOR"
  "${NICE[@]}" go build -p "$JOBS" -trimpath -ldflags "$ld" -o "$out/bin/" "${pkgs[@]}"
  # pause: the tiny init process of every pod sandbox, from the same module's source.
  local kdir
  kdir=$(go list -m -f '{{.Dir}}' k8s.io/kubernetes)
  [[ -x $out/bin/pause ]] \
    || "${NICE[@]}" gcc -Os -static -DVERSION="$KVER-netslo" -o "$out/bin/pause" "$kdir/build/pause/linux/pause.c"
  cd /; rm -rf "$work"
  touch "$out/.done"
  log "kubernetes $KVER built into $out/bin"
}

build_etcd() {  # VERSION
  local EVER=$1 out work
  out=$(etcd_dir "$EVER")
  if [[ -f "$out/.done" ]]; then log "etcd $EVER cached in $out"; return; fi
  log "building etcd $EVER"
  work="$NETSLO_K8S_CACHE/work-etcd-$EVER"
  rm -rf "$work" "$out"; mkdir -p "$work" "$out/bin"
  cd "$work"
  # server/v3 points its sibling modules at ../<dir>; use the same published version instead.
  throwaway_gomod go.etcd.io/etcd/server/v3 "$EVER" '^\s*go\.etcd\.io/etcd/[a-z0-9/]+ => \.\./' "$EVER"
  "${NICE[@]}" go get "go.etcd.io/etcd/server/v3@$EVER" >/dev/null 2>&1 || "${NICE[@]}" go get "go.etcd.io/etcd/server/v3@$EVER"
  grep -q "go.etcd.io/etcd/server/v3 $EVER" go.mod || { log "go.mod does not pin etcd server $EVER"; exit 1; }
  "${NICE[@]}" go build -p "$JOBS" -trimpath -ldflags "-s -w" -o "$out/bin/etcd" go.etcd.io/etcd/server/v3
  cd /; rm -rf "$work"
  touch "$out/.done"
  log "etcd $EVER built into $out/bin"
}

mkdir -p "$NETSLO_K8S_CACHE"
start=$(date +%s)
case ${1:-} in
  "") build_kubernetes ;;
  etcd) [[ ${2:-} =~ ^v3\.[0-9]+\.[0-9]+$ ]] || { log "etcd VERSION: got '${2:-}', expected v3.X.Y"; exit 2; }
        build_etcd "$2" ;;
  *) echo "usage: kubernetes.sh [etcd VERSION]" >&2; exit 2 ;;
esac
log "done in $(( $(date +%s) - start )) s"
