# shellcheck shell=bash disable=SC2034  # sourced: the other scripts use these
# Pinned Kubernetes and etcd versions of the kind node image, and where their builds are cached.
# v1.37.0 by default: kind v0.33.0's default node image, a supported minor (1.34 reached end of life on
# 2026-10-27); NETSLO_KVER=v1.34.4 still builds the old one. kubelet >= 1.35 refuses a cgroup v1 host
# unless told failCgroupV1: false; the kind and minikube providers tell it so on such a host.
KVER=${NETSLO_KVER:-v1.37.0}
KMAJOR=1
KMINOR=${KVER#v1.}; KMINOR=${KMINOR%%.*}
STAGING_VER=v0.${KVER#v1.}
K8S_COMPONENTS=(kubelet kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubectl kubeadm)

NETSLO_K8S_CACHE=${NETSLO_K8S_CACHE:-/var/cache/netslo/k8s}
K8S_DIR=$NETSLO_K8S_CACHE/k8s-$KVER
etcd_dir() { echo "$NETSLO_K8S_CACHE/etcd-$1"; }   # VERSION (v3.x.y) -> directory holding bin/etcd
