#!/usr/bin/env bash
# Offline checks of what netslo ships for Kubernetes and GitHub Actions:
#   1. actionlint on .github/workflows/*.yml (built from the Go module proxy, pinned, cached)
#   2. every manifest in netslo/providers/kube/templates/ (agent templates) and every object the providers generate
#      (agent pods, hostNetwork pod, Services, namespace, impairment DaemonSet) against the OpenAPI
#      schemas of the pinned Kubernetes version (kubernetes-validate, strict: unknown fields are errors)
#   3. the committed kind configs equal what the kind provider writes; CNI data files load
#   4. bash -n on the scripts
#   5. bash -n (and shellcheck) on the run: blocks of the composite action, action.yml
# No cluster and no network beyond the Go module proxy / PyPI (for the first install of the tools).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
cd "$REPO"
# shellcheck source=scripts/kind-offline/versions.sh
. "$HERE/kind-offline/versions.sh"

ACTIONLINT_VERSION=v1.7.12
KUBERNETES_VALIDATE_VERSION=1.37.0
# Tool cache: /var/cache/netslo/tools as root (the project's CI machine), else the user's cache dir
# (GitHub's lint job runs as the runner user, who cannot write /var/cache). NETSLO_TOOLS overrides.
if [[ -n ${NETSLO_TOOLS:-} ]]; then TOOLS=$NETSLO_TOOLS
elif ((EUID == 0)); then TOOLS=/var/cache/netslo/tools
else TOOLS=${XDG_CACHE_HOME:-$HOME/.cache}/netslo/tools
fi
# The interpreter with netslo's dependencies: $PYTHON, else the .venv scripts/setup.sh makes, else python3.
if [[ -n ${PYTHON:-} ]]; then PY=$PYTHON
elif [[ -x .venv/bin/python ]]; then PY=.venv/bin/python
else PY=python3
fi
fail=0
say() { printf '[lint-k8s] %s\n' "$*" >&2; }

# 1. actionlint
ACTIONLINT=$TOOLS/actionlint-$ACTIONLINT_VERSION
if [[ ! -x $ACTIONLINT ]]; then
  say "building actionlint $ACTIONLINT_VERSION (go install)"
  mkdir -p "$TOOLS"
  tmp=$(mktemp -d)
  GOBIN=$tmp nice -n 19 go install "github.com/rhysd/actionlint/cmd/actionlint@$ACTIONLINT_VERSION"
  mv "$tmp/actionlint" "$ACTIONLINT"
  rmdir "$tmp"
fi
if "$ACTIONLINT" -no-color -oneline .github/workflows/*.yml; then
  say "actionlint: clean"
else
  say "actionlint: FAILED"; fail=1
fi

# 2. manifests against the pinned Kubernetes version's schemas
if ! "$PY" -c 'import kubernetes_validate' 2>/dev/null; then
  say "installing kubernetes-validate==$KUBERNETES_VALIDATE_VERSION"
  "$PY" -m pip install -q "kubernetes-validate==$KUBERNETES_VALIDATE_VERSION"
fi
gen=$(mktemp -d)
trap 'rm -rf "$gen"' EXIT
"$PY" - "$gen" <<'EOF'
import sys, yaml
from netslo.providers.kube import manifests as km
out = sys.argv[1]
objs = {
    "namespace": km.namespace_manifest("lint0001"),
    "agent-pod": km.agent_pod_manifest("server", "lint0001", "node-a", annotations={
        "kubernetes.io/egress-bandwidth": "10M", "kubernetes.io/ingress-bandwidth": "20M"}),
    "hostnet-pod": km.agent_pod_manifest("base", "lint0001", "node-a", host_network=True, responders=()),
    "svc-clusterip": km.service_manifest("srv", "lint0001", "server"),
    "svc-nodeport-local": km.service_manifest("srv-l", "lint0001", "server", type="NodePort",
                                              external_traffic_policy="Local"),
    "svc-nodeport-cluster": km.service_manifest("srv-c", "lint0001", "server", type="NodePort",
                                                external_traffic_policy="Cluster"),
    "impairment-daemonset": km.impairment_daemonset_manifest("lint0001"),
}
for name, obj in objs.items():
    with open(f"{out}/{name}.yaml", "w") as f:
        yaml.safe_dump(obj, f, sort_keys=False)
EOF
kver=${KVER#v}
if "$PY" -m kubernetes_validate --strict --quiet -k "$kver" netslo/providers/kube/templates/*.yaml "$gen"/*.yaml; then
  say "manifests: netslo/providers/kube/templates/*.yaml and generated objects valid against Kubernetes $kver (strict)"
else
  say "manifests: FAILED against Kubernetes $kver"; fail=1
fi

# 3. generated kind configs / CNI data in sync
if "$PY" - <<'EOF'
import sys
from pathlib import Path
from netslo.providers import cni
from netslo.providers.kind.cluster import KindProvider
bad = 0
for name in cni.CNIS:
    cni.load(name)
    committed = Path(f"netslo/providers/kind/kind-{name}.yaml").read_text()
    body = KindProvider(cni=name, nodes=2, workdir="/nonexistent").config_yaml().split("\n", 1)[1]
    if committed.split("\n", 2)[2] != body:
        print(f"netslo/providers/kind/kind-{name}.yaml differs from what KindProvider writes", file=sys.stderr)
        bad = 1
sys.exit(bad)
EOF
then say "kind configs and CNI data files consistent"; else fail=1; fi

# 4. scripts parse (and pass shellcheck at warning level where shellcheck is installed)
for f in scripts/*.sh scripts/kind-offline/*.sh; do bash -n "$f" || { say "bash -n $f failed"; fail=1; }; done
if command -v shellcheck >/dev/null; then
  if shellcheck -S warning scripts/*.sh scripts/kind-offline/*.sh; then say "shellcheck: clean"; else fail=1; fi
fi

# 5. the composite action's run: blocks (actionlint checks only how workflows call it): bash -n, and
#    with shellcheck where it is installed; ${{ }} expressions are replaced by a word first
if "$PY" - "$gen" <<'EOF'
import re, sys, yaml
steps = yaml.safe_load(open("action.yml"))["runs"]["steps"]
for i, step in enumerate(steps):
    if "run" in step:
        with open(f"{sys.argv[1]}/action-step-{i:02d}.sh", "w") as f:
            f.write("#!/usr/bin/env bash\n# " + step.get("name", "") + "\n" + re.sub(r"\$\{\{.*?\}\}", "X", step["run"]))
EOF
then
  for f in "$gen"/action-step-*.sh; do bash -n "$f" || { say "action.yml: bash -n failed: $(sed -n 2p "$f")"; fail=1; }; done
  if command -v shellcheck >/dev/null; then
    if shellcheck -S warning "$gen"/action-step-*.sh; then say "action.yml run blocks: shellcheck clean"; else fail=1; fi
  fi
else
  say "action.yml: cannot read its steps"; fail=1
fi

if ((fail)); then say "FAILED"; exit 1; fi
say "all checks passed"
