#!/usr/bin/env bash
# Make the local cluster's credentials under $1 (a run's state dir): a self-signed CA, the apiserver's
# serving certificate, its kubelet-client certificate, the service-account key pair, a static token
# file and one kubeconfig per client. Test-only credentials, valid 30 days, never leave this machine.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=scripts/local-k8s/versions.sh
. "$HERE/versions.sh"
PKI=${1:?usage: pki.sh DIR}
APISERVER_URL=${2:?usage: pki.sh DIR APISERVER_URL}
mkdir -p "$PKI"
cd "$PKI"
umask 077

openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=netslo-local-ca" \
  -keyout ca.key -out ca.crt 2>/dev/null

cert() {  # cert NAME SUBJECT [SAN]
  local name=$1 subj=$2 san=${3:-}
  openssl req -newkey rsa:2048 -nodes -subj "$subj" -keyout "$name.key" -out "$name.csr" 2>/dev/null
  if [[ -n $san ]]; then
    printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\n' "$san" > "$name.ext"
  else
    printf 'extendedKeyUsage=clientAuth\n' > "$name.ext"
  fi
  openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 \
    -extfile "$name.ext" -out "$name.crt" 2>/dev/null
  rm -f "$name.csr" "$name.ext"
}
cert apiserver "/CN=kube-apiserver" \
  "IP:127.0.0.1,IP:${SERVICE_CIDR%.0.0/16}.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc"
cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
openssl genrsa -out sa.key 2048 2>/dev/null
openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null

# token,user,uid,"group": every component is a cluster admin in this throwaway test cluster.
: > tokens.csv
for who in admin kube-controller-manager kube-scheduler kubelet kube-proxy; do
  tok=$(openssl rand -hex 24)
  user=$who
  [[ $who == kubelet ]] && user="system:node:$NODE_NAME"
  [[ $who == kube-proxy ]] && user="system:kube-proxy"
  [[ $who == kube-controller-manager || $who == kube-scheduler ]] && user="system:$who"
  printf '%s,%s,%s,"system:masters"\n' "$tok" "$user" "$who" >> tokens.csv
  cat > "$who.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: netslo-local
  cluster:
    certificate-authority: $PKI/ca.crt
    server: $APISERVER_URL
users:
- name: $who
  user:
    token: $tok
contexts:
- name: netslo-local
  context: {cluster: netslo-local, user: $who}
current-context: netslo-local
EOF
done
chmod 0644 ca.crt
