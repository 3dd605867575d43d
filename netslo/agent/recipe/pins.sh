#!/bin/sh
# pins.sh PACKAGES REQUIREMENTS: the "name==version" lines of REQUIREMENTS for the names in PACKAGES
# (packages.txt: one name a line, comments and blank lines left out), on stdout; one line on stderr
# and exit 1 when a name has no pin. Used by the Dockerfile beside it and by
# scripts/kind-offline/agent-image.sh, so both images install the same packages.
set -eu
names=$(grep -v '^#' "$1" | grep . || true)
pins=$(grep -iE "^($(printf '%s\n' "$names" | paste -sd'|' -))==" "$2" || true)
if [ -z "$names" ] || [ "$(printf '%s\n' "$pins" | grep -c .)" != "$(printf '%s\n' "$names" | grep -c .)" ]; then
  echo "agent image: $1 names $(echo $names); $2 pins only: $(echo $pins)" >&2
  exit 1
fi
printf '%s\n' "$pins"
