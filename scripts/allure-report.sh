#!/usr/bin/env bash
# Build the Allure HTML report of a netslo run with the pinned Allure command line.
#
#   scripts/allure-report.sh [RESULTS_DIR] [REPORT_DIR]     (defaults: allure-results allure-report)
#   scripts/allure-report.sh --install      only install the pinned Allure CLI (CI setup step)
#   scripts/allure-report.sh --which        print the Allure CLI path; exit 3 if it is not installed
#
# RESULTS_DIR is what `pytest -m cni --alluredir RESULTS_DIR` wrote. The Allure CLI is the npm package
# allure-commandline (pinned below; it needs Java 8+ on PATH); when `allure` of that version is not on
# PATH it is installed once with npm into $NETSLO_TOOLS (default ~/.cache/netslo). The trend history of
# a previous report in REPORT_DIR is carried over. ALLURE_SINGLE_FILE=1 writes one self-contained
# index.html (handy as a CI artifact); otherwise view the report with `allure open REPORT_DIR` or any
# static web server (browsers block the report's data files over file://).
set -euo pipefail

ALLURE_VERSION=2.46.1
results=${1:-allure-results}
report=${2:-allure-report}
tools=${NETSLO_TOOLS:-$HOME/.cache/netslo}

die() { echo "allure-report: $*" >&2; exit 2; }

installed() {   # path of the pinned Allure CLI, if present
    if command -v allure >/dev/null 2>&1 && [ "$(allure --version 2>/dev/null)" = "$ALLURE_VERSION" ]; then
        command -v allure
    elif [ -x "$tools/allure-$ALLURE_VERSION/node_modules/.bin/allure" ]; then
        echo "$tools/allure-$ALLURE_VERSION/node_modules/.bin/allure"
    else
        return 1
    fi
}

install() {
    command -v npm >/dev/null 2>&1 || die "allure $ALLURE_VERSION not found and npm is missing to install it"
    echo "allure-report: installing allure-commandline@$ALLURE_VERSION into $tools/allure-$ALLURE_VERSION" >&2
    mkdir -p "$tools/allure-$ALLURE_VERSION"
    npm install --no-audit --no-fund --prefix "$tools/allure-$ALLURE_VERSION" "allure-commandline@$ALLURE_VERSION" >&2
}

case "$results" in
    --which) installed || { echo "allure-report: allure-commandline@$ALLURE_VERSION is not installed (scripts/allure-report.sh --install)" >&2; exit 3; }
             exit 0 ;;
    --install) installed >/dev/null || install
               command -v java >/dev/null 2>&1 || echo "allure-report: warning: java not found — the Allure CLI needs a Java runtime" >&2
               echo "allure-report: $(installed) ($("$(installed)" --version))"
               exit 0 ;;
esac

[ -d "$results" ] || die "results directory '$results' not found — run pytest with --alluredir $results first"
ls "$results"/*-result.json >/dev/null 2>&1 || die "no *-result.json in '$results' — did the tests run with --alluredir?"
command -v java >/dev/null 2>&1 || die "java not found — the Allure CLI needs a Java runtime (apt-get install default-jre-headless)"

allure=$(installed) || { install; allure=$(installed); }
got=$("$allure" --version 2>/dev/null || true)
[ "$got" = "$ALLURE_VERSION" ] || die "expected Allure $ALLURE_VERSION, $allure reports '$got'"

if [ -d "$report/history" ]; then            # keep the trend widgets across runs
    mkdir -p "$results/history"
    cp -r "$report/history/." "$results/history/"
fi

export ALLURE_NO_ANALYTICS=${ALLURE_NO_ANALYTICS:-true}   # no Google Analytics tag in the report
args=(generate --clean -o "$report")
[ "${ALLURE_SINGLE_FILE:-0}" = "1" ] && args+=(--single-file)
"$allure" "${args[@]}" "$results"
echo "allure-report: $report/index.html (Allure $ALLURE_VERSION)"
