#!/usr/bin/env bash
# The dependency ranges of pyproject.toml at both ends: a venv with every runtime dependency at the
# lowest version its range allows (LOWEST below: the first that installs beside the others), and one
# with the newest each range allows; netslo installed into each, and the embedded gate run in it.
# Usage (root): scripts/dep-extremes.sh [low|high|both] [pytest args...], e.g. -k "test_protocols".
set -euo pipefail
cd "$(dirname "$0")/.."
which=${1:-both}; shift || true
PY=${PYTHON_BASE:-/usr/bin/python3}
LOWEST=("pytest==8.0.0" "allure-pytest==2.13.0" "kubernetes==36.0.0" "pyroute2==0.9.1" "scapy==2.5.0"
        "aiohttp==3.12.0" "paho-mqtt==2.0.0" "numpy==2.0.0" "scipy==1.13.0" "PyYAML==6.0" "jsonschema==4.18.0"
        "matplotlib==3.8.4" "cryptography==42.0.0" "pytest-timeout==2.2.0" "pytest-benchmark==5.0.0")
run() {   # name, pip arguments...
  local name=$1; shift
  local venv=${TMPDIR:-/tmp}/netslo-deps-$name
  rm -rf "$venv" && "$PY" -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "$@"
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps --force-reinstall .
  rm -rf build
  echo "== $name: $("$venv/bin/pip" list 2>/dev/null | grep -iE '^(pytest|kubernetes|numpy|scipy|aiohttp|cryptography) ' | tr -s ' ' | paste -sd, -)"
  "$venv/bin/python" -m pytest -m cni -p no:cacheprovider -q --netslo-results="$venv/results" "${ARGS[@]}"
}
ARGS=("$@")
if [[ $which == low || $which == both ]]; then run low "${LOWEST[@]}"; fi
if [[ $which == high || $which == both ]]; then run high . "pytest-benchmark>=5.0,<6" "pytest-timeout>=2.2,<3"; fi
