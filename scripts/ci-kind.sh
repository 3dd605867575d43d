#!/usr/bin/env bash
# The kind tier: the gate on a real kind cluster with a real CNI built from source, without a registry
# (scripts/kind-offline.sh), then the Kubernetes provider tests with --netslo-provider existing against
# the same cluster's kubeconfig (the reap tests kill -9 a run there and reap what it left). The engine
# is always taken down again, also when a test fails or the run is interrupted, and the host's FORWARD
# policy, ip_forward and namespaces are checked unchanged.
#
#   sudo bash scripts/ci-kind.sh [CNI ...]     (root: docker engine, mounts, cgroups)
#
# CNIs: cilium (built from the Go module proxy) by default, and calico too when NETSLO_CALICO_SRC names a
# git repository of projectcalico/calico holding tag v3.31.3. Declared skips: needs_netem (the node
# kernel is this machine's: no sch_netem), provider (the shaping studies need the embedded provider's
# node links), capability (Cilium's Bandwidth Manager needs sch_fq). Build times of a cold cache: see
# docs/kubernetes.md ("kind without a registry"); results in netslo-results-kind-<cni>/.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
cd "$REPO"
PY=${PYTHON:-python3}
t0=$(date +%s)
say() { echo "ci-kind [$(( $(date +%s) - t0 )) s] $*"; }
if (($#)); then CNIS=("$@"); else CNIS=(cilium); [[ -n ${NETSLO_CALICO_SRC:-} ]] && CNIS+=(calico); fi
for c in "${CNIS[@]}"; do
  case $c in
    cilium) export NETSLO_CILIUM=1 NETSLO_CNI_ALLOW_UNRECORDED=1 ;;  # chart packed locally: no recorded digest
    calico) [[ -n ${NETSLO_CALICO_SRC:-} ]] || { echo "ci-kind: calico needs NETSLO_CALICO_SRC" >&2; exit 2; } ;;
    *) echo "ci-kind: CNI $c: expected cilium or calico" >&2; exit 2 ;;
  esac
done

host_state() { echo "FORWARD $(iptables -S FORWARD | head -n1) ip_forward $(cat /proc/sys/net/ipv4/ip_forward)" \
  "netns $(ip netns list | wc -l)"; }
before=$(host_state)
trap 'bash "$HERE/kind-offline.sh" down || echo "ci-kind: kind-offline.sh down reported leftovers" >&2' EXIT
bash "$HERE/kind-offline.sh" up
eval "$(bash "$HERE/kind-offline.sh" env)"
say "toolchain up (engine, node image, agent image${NETSLO_CILIUM:+, Cilium}${NETSLO_CALICO_SRC:+, Calico})"

rc=0 first=1
for cni in "${CNIS[@]}"; do
  results=netslo-results-kind-$cni
  say "the gate on kind + $cni (2 nodes)"
  "$PY" -m pytest -q -p no:cacheprovider -rs -m cni --netslo-provider kind --netslo-cni "$cni" --netslo-nodes 2 \
    --netslo-keep-cluster --netslo-allow-skip needs_netem,provider,capability --netslo-results "$results" || rc=1
  say "kubectl -n kube-system get ds; the pod route to the other node"
  "$NETSLO_KUBECTL" --kubeconfig "/tmp/netslo-kind-netslo/kubeconfig" -n kube-system get ds || rc=1
  docker exec netslo-worker ip route | grep -E 'vxlan|cilium' || true
  if ((first)); then
    say "Kubernetes provider tests, --netslo-provider existing on the same cluster"
    NETSLO_KUBECONFIG=/tmp/netslo-kind-netslo/kubeconfig "$PY" -m pytest -q -p no:cacheprovider -rs \
      tests/integration/test_kube_existing.py tests/integration/test_kube_impair.py \
      tests/integration/test_kube_kubeconfig.py tests/integration/test_kube_reap.py || rc=1
    first=0
  fi
  "$NETSLO_KIND" delete cluster --name netslo >/dev/null || rc=1
done
bash "$HERE/kind-offline.sh" down
trap - EXIT
after=$(host_state)
if [[ $before != "$after" ]]; then echo "ci-kind: host changed: before [$before] after [$after]" >&2; rc=1; fi
say "done (exit $rc)"
exit $rc
