#!/usr/bin/env bash
# Install everything netslo needs on a fresh Debian/Ubuntu machine (run as root). Idempotent.
#   system: iproute2 (ip, tc), util-linux (nsenter), procps (sysctl), iptables, iputils-ping, iperf3,
#           irtt (reference tools), gcc (C reference in benchmarks), mosquitto,
#           user-mode-linux (a 6.1 kernel with sch_netem, booted when the host kernel lacks netem),
#           chromium + Java (Allure HTML report and its browser check)
#   python: requirements.txt (pinned) + netslo itself (editable, registers the pytest plugin)
set -euo pipefail
cd "$(dirname "$0")/.."
PKGS=(iproute2 util-linux procps iptables nftables iputils-ping iperf3 irtt gcc libc6-dev ethtool mosquitto user-mode-linux
      chromium)
command -v java >/dev/null 2>&1 || PKGS+=(default-jre-headless)   # the Allure CLI runs on Java
missing=()
for p in "${PKGS[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ "${#missing[@]}" -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# mosquitto from Debian starts a system broker on install; netslo starts its own inside pods.
systemctl disable --now mosquitto >/dev/null 2>&1 || true
PY=${PYTHON:-python3}
"$PY" -m pip install -q --disable-pip-version-check --root-user-action=ignore -r requirements.txt
"$PY" -m pip install -q --disable-pip-version-check --root-user-action=ignore --no-deps --no-build-isolation -e . 2>/dev/null \
    || "$PY" -m pip install -q --disable-pip-version-check --root-user-action=ignore --no-deps -e .
bash scripts/allure-report.sh --install >/dev/null   # pinned Allure CLI from npm, cached
echo "netslo: setup done ($("$PY" --version), $(ip -V))"
