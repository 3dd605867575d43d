# shellcheck shell=bash
# Calico for the offline kind cluster (sourced by scripts/kind-offline.sh).
#
# The Go module proxy serves one version of github.com/projectcalico/calico: the pseudo-version below,
# a commit of the v3.28 line (git describe: v3.28.4-11-ga0db560f05) whose manifests name
# calico/node:v3.28.5. Its go.mod replaces github.com/projectcalico/api with "./api", a nested module
# that the module zip does not contain, so every Calico binary (felix/confd in calico-node, the CNI
# plugin, kube-controllers: libcalico-go imports the API types everywhere) needs
# github.com/projectcalico/api from the proxy, and the proxy refuses it (403 "This module version is
# not available"). calico_build checks exactly that and stops with the proxy's answer; it does not
# pretend to build. A proxy (GOPROXY) that serves github.com/projectcalico/api would lift the blocker.
CALICO_MODULE=github.com/projectcalico/calico
CALICO_PSEUDO=v1.11.0-cni-plugin.0.20250813170300-a0db560f0520
CALICO_IMAGE_TAG=v3.28.5
CNI_MIRROR=${NETSLO_CNI_MIRROR:-$KO_CACHE/cni-mirror}

calico_build_cached() { compgen -G "$KO_IMAGES/calico-*.tar" >/dev/null || [[ -f $KO_CACHE/calico.blocked ]]; }
calico_build() {
  local dir err
  if compgen -G "$KO_IMAGES/calico-*.tar" >/dev/null; then ko_log "calico: images cached"; return 0; fi
  dir=$(go mod download -json "$CALICO_MODULE@$CALICO_PSEUDO" | jq -r .Dir) \
    || { ko_log "calico: $CALICO_MODULE@$CALICO_PSEUDO not served"; return 1; }
  ko_log "calico: module $CALICO_MODULE@$CALICO_PSEUDO in $dir ($(grep -c 'calico/node:' "$dir/manifests/calico.yaml") calico/node image refs, tag $CALICO_IMAGE_TAG)"
  if ! err=$(cd "$KO_CACHE" && go list -m -versions github.com/projectcalico/api 2>&1); then
    ko_log "calico: BLOCKED: $CALICO_MODULE's go.mod replaces github.com/projectcalico/api => ./api (not in the module zip), and the proxy refuses it:"
    printf '  %s\n' "$err" >&2
    echo "github.com/projectcalico/api: $(echo "$err" | tr '\n' ' ')" > "$KO_CACHE/calico.blocked"
    return 1
  fi
  ko_log "calico: github.com/projectcalico/api is served here; the image build is not written yet (it was never reachable on this machine)"
  return 1
}

calico_load() {  # docker load the Calico images if they were built
  local f
  compgen -G "$KO_IMAGES/calico-*.tar" >/dev/null || return 1
  for f in "$KO_IMAGES"/calico-*.tar; do docker load -i "$f" >/dev/null; done
}

calico_manifest_dir() {  # the CNI mirror directory (NETSLO_CNI_MIRROR), if it holds any file
  [[ -d $CNI_MIRROR ]] && [[ -n $(find "$CNI_MIRROR" -type f -print -quit) ]] && echo "$CNI_MIRROR"
}

calico_status() {
  if compgen -G "$KO_IMAGES/calico-*.tar" >/dev/null; then
    echo "calico: images $(basename -a "$KO_IMAGES"/calico-*.tar | paste -sd' ')"
  elif [[ -f $KO_CACHE/calico.blocked ]]; then
    echo "calico: not built: $(cat "$KO_CACHE/calico.blocked")"
  else
    echo "calico: not built"
  fi
}
