# shellcheck shell=bash disable=SC2034  # sourced: the other scripts use these
# Pinned versions and paths of the local single-node cluster (sourced by the other scripts).
# v1.34 on purpose: this machine mounts cgroup v1; kubelet >= 1.35 refuses it by default.
KVER=${NETSLO_KVER:-v1.34.4}
KMAJOR=1
KMINOR=34
STAGING_VER=v0.${KVER#v1.}
EVER=${NETSLO_ETCD_VER:-v3.6.16}
K8S_COMPONENTS=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)

NETSLO_K8S_CACHE=${NETSLO_K8S_CACHE:-/var/cache/netslo/k8s}
K8S_DIR=$NETSLO_K8S_CACHE/k8s-$KVER
ETCD_DIR=$NETSLO_K8S_CACHE/etcd-$EVER

# Runtime state of the running cluster (removed by "down").
NETSLO_K8S_STATE=${NETSLO_K8S_STATE:-/run/netslo-k8s}
NODE_NETNS=netslo-k8s-node
NODE_NAME=netslo-node
# Host <-> node veth on a /30 out of the benchmarking range (RFC 2544), never routed off this machine.
HOST_IF=nslo-host
NODE_IF=nslo-node
HOST_IP=198.18.0.1
NODE_IP=198.18.0.2
POD_CIDR=10.244.0.0/24
SERVICE_CIDR=10.96.0.0/16
