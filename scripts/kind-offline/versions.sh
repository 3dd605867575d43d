# shellcheck shell=bash disable=SC2034  # sourced: the other scripts use these
# Pinned Kubernetes and etcd versions of the kind node image, and where their builds are cached.
# v1.34 on purpose: this machine mounts cgroup v1; kubelet >= 1.35 refuses it by default.
KVER=${NETSLO_KVER:-v1.34.4}
KMAJOR=1
KMINOR=34
STAGING_VER=v0.${KVER#v1.}
K8S_COMPONENTS=(kubelet kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubectl kubeadm)

NETSLO_K8S_CACHE=${NETSLO_K8S_CACHE:-/var/cache/netslo/k8s}
K8S_DIR=$NETSLO_K8S_CACHE/k8s-$KVER
etcd_dir() { echo "$NETSLO_K8S_CACHE/etcd-$1"; }   # VERSION (v3.x.y) -> directory holding bin/etcd
