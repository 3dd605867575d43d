#!/usr/bin/env bash
# Install everything netslo needs on a fresh Debian/Ubuntu machine (run as root). Idempotent.
#   system: iproute2 (ip, tc), util-linux (nsenter), procps (sysctl), iptables, iputils-ping, iperf3,
#           irtt and sockperf (reference tools), gcc (C reference in benchmarks; the UML ptrace shim), mosquitto,
#           user-mode-linux (a 6.1 kernel with sch_netem, booted when the host kernel lacks netem),
#           chromium + Java (Allure HTML report and its browser check)
#   python: a virtual environment .venv/ made with the distribution's own python3 (PEP 668 forbids pip
#           into it), holding requirements.txt (pinned) + netslo itself (editable, registers the plugin).
#           The README commands run .venv/bin/python. PYTHON=/path/to/python picks another interpreter.
set -euo pipefail
cd "$(dirname "$0")/.."
PKGS=(python3 python3-venv iproute2 util-linux procps iptables nftables iputils-ping iperf3 irtt sockperf gcc libc6-dev ethtool mosquitto user-mode-linux)
# Chromium (only for the Allure report's browser check) is a deb on Debian; Ubuntu ships it as a snap,
# which containers and CI images often cannot run: there the check skips, nothing else needs it.
CHROMIUM=chromium
command -v java >/dev/null 2>&1 || PKGS+=(default-jre-headless)   # the Allure CLI runs on Java
missing=()
for p in "${PKGS[@]}" "$CHROMIUM"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ "${#missing[@]}" -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    if ! grep -q '^Filename:' <<<"$(apt-cache show "$CHROMIUM" 2>/dev/null)"; then
        echo "netslo: setup: no '$CHROMIUM' deb on this distribution; the Allure browser check will skip" >&2
        keep=()
        for p in "${missing[@]}"; do [ "$p" = "$CHROMIUM" ] || keep+=("$p"); done
        missing=("${keep[@]}")
    fi
    [ "${#missing[@]}" -eq 0 ] || apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# mosquitto from Debian starts a system broker on install; netslo starts its own inside pods.
systemctl disable --now mosquitto >/dev/null 2>&1 || true
BASE=${PYTHON:-/usr/bin/python3}
VENV=.venv
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import sys; sys.exit(0)' 2>/dev/null; then
    rm -rf "$VENV"
    "$BASE" -m venv "$VENV"
fi
PY=$VENV/bin/python
PIP=("$PY" -m pip install -q --disable-pip-version-check)
"${PIP[@]}" -r requirements.txt
"${PIP[@]}" --no-deps --no-build-isolation -e . 2>/dev/null || "${PIP[@]}" --no-deps -e .
bash scripts/allure-report.sh --install >/dev/null   # pinned Allure CLI from npm, cached
echo "netslo: setup done ($("$PY" --version), $(ip -V))"
