# shellcheck shell=bash disable=SC2034  # sourced: the other scripts use these
# Pinned Kubernetes and etcd versions of the kind node image, and where their builds are cached.
# The version kind v0.33.0's default node image runs (kindest/node:v1.37.0), so online and offline
# clusters run the same Kubernetes. kubelet >= 1.35 refuses a cgroup v1 host unless its configuration
# says failCgroupV1: false (KEP-5573); netslo's kind and minikube providers set it on such a host.
KVER=${NETSLO_KVER:-v1.37.0}
KMAJOR=1
KMINOR=37
STAGING_VER=v0.${KVER#v1.}
K8S_COMPONENTS=(kubelet kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubectl kubeadm)

NETSLO_K8S_CACHE=${NETSLO_K8S_CACHE:-/var/cache/netslo/k8s}
K8S_DIR=$NETSLO_K8S_CACHE/k8s-$KVER
etcd_dir() { echo "$NETSLO_K8S_CACHE/etcd-$1"; }   # VERSION (v3.x.y) -> directory holding bin/etcd
