#!/usr/bin/env bash
# A real single-node Kubernetes on this machine, without a container registry.
#
#   scripts/local-k8s.sh up       install packages, build (cached), start; prints the kubeconfig path
#   scripts/local-k8s.sh down     stop everything and remove every trace (also after a failed "up")
#   scripts/local-k8s.sh status   what runs; exit 0 only when the node is Ready
#   scripts/local-k8s.sh build    only build/cache the binaries and images
#   scripts/local-k8s.sh image    rebuild and re-import the agent image (after changing netslo/)
#   scripts/local-k8s.sh kubeconfig   print the kubeconfig path
#   scripts/local-k8s.sh env      print NETSLO_KUBECONFIG=... NETSLO_KUBECTL=... (for eval / export)
#
# Layout: etcd, kube-apiserver, controller-manager and scheduler run in the host network namespace on
# 127.0.0.1; the node (containerd + CNI bridge/bandwidth, kubelet, kube-proxy) runs in its own network
# namespace joined to the host by a veth pair. A socat inside the node namespace carries the node's
# connections to the apiserver's loopback port. Builds are cached in /var/cache/netslo (see versions.sh).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
LK=$HERE/local-k8s
# shellcheck source=scripts/local-k8s/versions.sh
. "$LK/versions.sh"

STATE=$NETSLO_K8S_STATE
VAR=/var/lib/netslo-k8s
PKI=$STATE/pki
LOGS=$STATE/logs
PIDS=$STATE/pids
APISERVER_PORT=16443
ETCD_PORT=23790
ETCD_PEER_PORT=23800
APISERVER_URL=https://127.0.0.1:$APISERVER_PORT
CONTAINERD_SOCK=$STATE/containerd/containerd.sock
# containerd's image store is a cache (like the binaries): kept across down/up so a warm "up" does not
# unpack the agent image again. Nothing is mounted there once containerd has stopped.
CONTAINERD_ROOT=${NETSLO_CONTAINERD_ROOT:-/var/cache/netslo/containerd}
HOST_NETNS=netslo-k8s-host
KUBECONFIG_PATH=$PKI/admin.kubeconfig
BIN=$K8S_DIR/bin
UP_TIMEOUT=${NETSLO_K8S_UP_TIMEOUT:-180}
T0=$(date +%s.%N)

log() { printf '[local-k8s %6.1fs] %s\n' "$(echo "$(date +%s.%N) - $T0" | bc)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
innode() { nsenter --net="/var/run/netns/$NODE_NETNS" "$@"; }
kc() { "$BIN/kubectl" --kubeconfig "$KUBECONFIG_PATH" "$@"; }

require_root() { [[ $(id -u) == 0 ]] || die "must run as root (network namespaces, mounts, cgroups)"; }

install_packages() {
  local need=() p
  for p in containerd runc containernetworking-plugins iptables conntrack socat openssl bc util-linux \
           iproute2 debootstrap gcc libc6-dev; do
    dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
  done
  if ((${#need[@]})); then
    log "apt-get install ${need[*]}"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  fi
}

# start NAME [--node] CMD...: run a daemon in its own session, pid and log in $STATE.
start() {
  local name=$1; shift
  local pre=()
  if [[ $1 == --node ]]; then pre=(nsenter "--net=/var/run/netns/$NODE_NETNS"); shift; fi
  setsid "${pre[@]}" "$@" >"$LOGS/$name.log" 2>&1 < /dev/null &
  echo $! > "$PIDS/$name.pid"
}

stop() {  # stop NAME: TERM, then KILL after 10 s; only the pid we recorded.
  [[ -n ${NETSLO_K8S_DEBUG:-} ]] && log "stop $1"
  local f=$PIDS/$1.pid pid
  [[ -f $f ]] || return 0
  pid=$(cat "$f")
  if running "$pid"; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 100); do running "$pid" || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

running() {  # running PID: exists and is not a zombie (pid 1 here may reap late)
  local st
  st=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
  [[ -n $st && $st != Z ]]
}
alive() { local f=$PIDS/$1.pid; [[ -f $f ]] && running "$(cat "$f")"; }

wait_for() {  # wait_for WHAT SECONDS CMD...: poll until CMD succeeds; names WHAT and its log on timeout.
  local what=$1 secs=$2; shift 2
  local end=$(( $(date +%s) + secs ))
  until "$@" >/dev/null 2>&1; do
    if (( $(date +%s) >= end )); then
      log "$what not ready after ${secs}s; last log lines:"
      tail -n 20 "$LOGS/$what.log" 2>/dev/null >&2 || true
      return 1
    fi
    sleep 0.2
  done
}

setup_network() {
  ip netns add "$NODE_NETNS"
  ip netns attach "$HOST_NETNS" $$
  ip link add "$HOST_IF" type veth peer name "$NODE_IF" netns "$NODE_NETNS"
  ip addr add "$HOST_IP/30" dev "$HOST_IF"
  ip link set "$HOST_IF" up
  innode ip link set lo up
  innode ip addr add "$NODE_IP/30" dev "$NODE_IF"
  innode ip link set "$NODE_IF" up
  # Service IPs need a route for the node's own OUTPUT path to reach kube-proxy's DNAT; no default route:
  # nothing in the node may send anywhere but this veth and its own pods.
  innode ip route add "$SERVICE_CIDR" dev "$NODE_IF"
  innode sysctl -qw net.ipv4.ip_forward=1
  innode sysctl -qw net.bridge.bridge-nf-call-iptables=1 2>/dev/null || true
  innode sysctl -qw net.ipv4.conf.all.route_localnet=1
}

write_configs() {
  mkdir -p "$STATE/cni/net.d" "$STATE/containerd" "$STATE/runc" "$CONTAINERD_ROOT" "$STATE/etc"
  cat > "$STATE/cni/net.d/10-netslo.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "netslo-bridge",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "$POD_CIDR"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}},
    {"type": "bandwidth", "capabilities": {"bandwidth": true}}
  ]
}
EOF
  cat > "$STATE/etc/containerd.toml" <<EOF
version = 2
root = "$CONTAINERD_ROOT"
state = "$STATE/containerd"
[grpc]
  address = "$CONTAINERD_SOCK"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.10"
  enable_selinux = false
  # kubelet asks -998 for sandboxes; lowering oom_score_adj needs CAP_SYS_RESOURCE, which this machine's
  # bounding set lacks: clamp to containerd's own score instead of failing every sandbox.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$STATE/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$STATE/runc"
EOF
  cat > "$STATE/etc/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://$CONTAINERD_SOCK
address: $NODE_IP
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $PKI/ca.crt}
authorization: {mode: AlwaysAllow}
podCIDR: $POD_CIDR
maxPods: 110
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
resolvConf: ""
syncFrequency: 10s
fileCheckFrequency: 10s
EOF
  cat > "$STATE/etc/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $PKI/kube-proxy.kubeconfig}
mode: iptables
clusterCIDR: $POD_CIDR
hostnameOverride: $NODE_NAME
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
nodePortAddresses: [primary]
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOF
  # The node reaches the apiserver's loopback port through this per-connection hop into the host netns.
  cat > "$STATE/etc/to-apiserver" <<EOF
#!/bin/sh
exec nsenter --net=/var/run/netns/$HOST_NETNS socat STDIO TCP:127.0.0.1:$APISERVER_PORT
EOF
  chmod +x "$STATE/etc/to-apiserver"
}

cmd_build() {
  require_root
  install_packages
  bash "$LK/build.sh"
  bash "$LK/images.sh" build
}

cmd_up() {
  require_root
  if [[ -d $STATE ]]; then
    if cmd_status >/dev/null 2>&1; then log "already up"; echo "$KUBECONFIG_PATH"; return 0; fi
    log "a previous cluster left state behind; cleaning it first"
    cmd_down
  fi
  cmd_build
  T0=$(date +%s.%N)
  trap 'log "up failed; tearing down"; cmd_down; exit 1' ERR
  mkdir -p "$STATE" "$LOGS" "$PIDS" "$VAR"
  setup_network
  bash "$LK/pki.sh" "$PKI" "$APISERVER_URL"
  write_configs

  start etcd "$ETCD_DIR/bin/etcd" --name netslo --data-dir "$VAR/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "netslo=http://127.0.0.1:$ETCD_PEER_PORT" --listen-metrics-urls "" \
    --quota-backend-bytes 1073741824 --unsafe-no-fsync
  start kube-apiserver "$BIN/kube-apiserver" --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
    --bind-address 127.0.0.1 --secure-port "$APISERVER_PORT" --advertise-address 127.0.0.1 \
    --endpoint-reconciler-type none --service-cluster-ip-range "$SERVICE_CIDR" \
    --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
    --client-ca-file "$PKI/ca.crt" --token-auth-file "$PKI/tokens.csv" --authorization-mode RBAC \
    --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
    --service-account-issuer https://kubernetes.default.svc \
    --kubelet-client-certificate "$PKI/apiserver-kubelet-client.crt" \
    --kubelet-client-key "$PKI/apiserver-kubelet-client.key" \
    --kubelet-preferred-address-types InternalIP,Hostname --allow-privileged=true --profiling=false
  wait_for kube-apiserver 60 kc get --raw /readyz
  log "apiserver ready"
  start kube-controller-manager "$BIN/kube-controller-manager" --kubeconfig "$PKI/kube-controller-manager.kubeconfig" \
    --bind-address 127.0.0.1 --leader-elect=false --service-account-private-key-file "$PKI/sa.key" \
    --root-ca-file "$PKI/ca.crt" --use-service-account-credentials=false \
    --authentication-kubeconfig "$PKI/kube-controller-manager.kubeconfig" \
    --authorization-kubeconfig "$PKI/kube-controller-manager.kubeconfig" --profiling=false
  start kube-scheduler "$BIN/kube-scheduler" --kubeconfig "$PKI/kube-scheduler.kubeconfig" \
    --bind-address 127.0.0.1 --leader-elect=false \
    --authentication-kubeconfig "$PKI/kube-scheduler.kubeconfig" \
    --authorization-kubeconfig "$PKI/kube-scheduler.kubeconfig" --profiling=false
  start apiserver-hop --node socat "TCP-LISTEN:$APISERVER_PORT,bind=127.0.0.1,fork,reuseaddr" "EXEC:$STATE/etc/to-apiserver"
  start containerd --node containerd --config "$STATE/etc/containerd.toml"
  wait_for containerd 30 ctr --address "$CONTAINERD_SOCK" version
  bash "$LK/images.sh" import "$CONTAINERD_SOCK"
  log "images imported"
  start kubelet --node "$BIN/kubelet" --config "$STATE/etc/kubelet.yaml" --kubeconfig "$PKI/kubelet.kubeconfig" \
    --hostname-override "$NODE_NAME" --node-ip "$NODE_IP" --node-labels netslo.io/local-node=true,netslo.io/cni=bridge
  start kube-proxy --node "$BIN/kube-proxy" --config "$STATE/etc/kube-proxy.yaml"
  wait_for kubelet "$UP_TIMEOUT" kc wait --for=condition=Ready "node/$NODE_NAME" --timeout=2s
  log "node $NODE_NAME Ready"
  wait_for kube-controller-manager 60 kc -n default get serviceaccount default
  trap - ERR
  log "cluster up; kubeconfig: $KUBECONFIG_PATH"
  echo "$KUBECONFIG_PATH"
}

kill_shims() {  # containerd shims of OUR socket only (matched by its unique address), by pid.
  local p cmd
  for p in /proc/[0-9]*; do
    cmd=$({ tr '\0' ' ' < "$p/cmdline"; } 2>/dev/null) || continue
    if [[ $cmd == *containerd-shim* && $cmd == *"$CONTAINERD_SOCK"* ]]; then kill -KILL "${p#/proc/}" 2>/dev/null || true; fi
  done
}

umount_under() {  # unmount every mount point below $1, deepest first
  local root=$1 m
  awk -v r="$root" '$5 == r || index($5, r "/") == 1 {print $5}' /proc/self/mountinfo | sort -r | while read -r m; do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
  done
}

rm_cgroup_tree() {  # rmdir a cgroup v1/v2 directory tree bottom-up (cgroupfs only allows rmdir)
  local d=$1
  [[ -d $d ]] || return 0
  find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null || true
}

cmd_down() {
  require_root
  trap - ERR
  local n
  stop kube-proxy; stop kubelet
  if alive containerd; then
    for n in $(ctr --address "$CONTAINERD_SOCK" -n k8s.io tasks ls -q 2>/dev/null); do
      ctr --address "$CONTAINERD_SOCK" -n k8s.io tasks kill -s SIGKILL "$n" >/dev/null 2>&1 || true
    done
    sleep 0.5
  fi
  kill_shims
  stop containerd; stop apiserver-hop; stop kube-scheduler; stop kube-controller-manager
  stop kube-apiserver; stop etcd
  kill_shims
  umount_under /var/lib/kubelet
  umount_under "$STATE"
  umount_under "$VAR"
  umount_under "$CONTAINERD_ROOT"
  for n in /var/run/netns/cni-*; do [[ -e $n ]] && ip netns delete "${n##*/}" 2>/dev/null; done
  ip netns delete "$NODE_NETNS" 2>/dev/null || true
  ip link delete "$HOST_IF" 2>/dev/null || true
  ip netns delete "$HOST_NETNS" 2>/dev/null || true
  for n in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do rm_cgroup_tree "$n"; done
  rm -rf /var/lib/cni /var/log/containers /var/log/pods /var/lib/kubelet "$STATE" "$VAR" /run/containerd/runc/k8s.io
  rmdir /run/containerd/runc /run/containerd 2>/dev/null || true
  local left=()
  [[ -e /var/run/netns/$NODE_NETNS ]] && left+=("netns $NODE_NETNS")
  ip link show "$HOST_IF" >/dev/null 2>&1 && left+=("link $HOST_IF")
  ls -d /sys/fs/cgroup/*/kubepods >/dev/null 2>&1 && left+=("cgroups kubepods")
  grep -q -e ' /var/lib/kubelet' -e " $STATE" -e " $CONTAINERD_ROOT/" /proc/self/mountinfo && left+=("mounts")
  for n in /var/run/netns/cni-* "/var/run/netns/$HOST_NETNS"; do [[ -e $n ]] && left+=("netns ${n##*/}"); done
  local p
  for p in /proc/[0-9]*; do
    [[ $({ tr '\0' ' ' < "$p/cmdline"; } 2>/dev/null) == *"$STATE/"* ]] && left+=("process ${p#/proc/}")
  done
  if ((${#left[@]})); then log "down: left behind: ${left[*]}"; return 1; fi
  log "down: clean"
}

cmd_status() {
  local c ok=0
  for c in etcd kube-apiserver kube-controller-manager kube-scheduler apiserver-hop containerd kubelet kube-proxy; do
    if alive "$c"; then echo "$c: running (pid $(cat "$PIDS/$c.pid"))"; else echo "$c: not running"; ok=1; fi
  done
  if [[ -f $KUBECONFIG_PATH ]] && kc get node "$NODE_NAME" --request-timeout=5s 2>/dev/null; then
    kc wait --for=condition=Ready "node/$NODE_NAME" --timeout=1s >/dev/null 2>&1 || ok=1
  else
    echo "node: unknown"; ok=1
  fi
  echo "kubeconfig: $KUBECONFIG_PATH"
  return $ok
}

case ${1:-} in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  build) cmd_build ;;
  image) require_root; bash "$LK/images.sh" build; alive containerd && bash "$LK/images.sh" import "$CONTAINERD_SOCK" ;;
  kubeconfig) echo "$KUBECONFIG_PATH" ;;
  env) echo "NETSLO_KUBECONFIG=$KUBECONFIG_PATH"; echo "NETSLO_KUBECTL=$BIN/kubectl" ;;
  *) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
