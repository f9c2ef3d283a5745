#!/usr/bin/env bash
# Every test gpu2dra has, on a machine with only Python 3.11+ and Go: installs what they need.
#   bash tests/run.sh [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."

[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]'

# A real kube-apiserver, controller-manager, scheduler, etcd and kubectl for each Kubernetes
# release the tests run on (tests/k8s/v1.37, v1.34), helm, Kueue's manager, Karpenter's kwok
# provider and the standalone kustomize, built with Go.
# Without Go the end-to-end tests skip, except in CI, where that fails the run.
if command -v go >/dev/null || [ "${CI:-}" = true ]; then
  bash tests/k8s/build.sh
  bash tests/kueue/build.sh
  bash tests/karpenter/build.sh
  bash tests/kustomize/build.sh
  bash tests/driver/build.sh
  # The real node of tests/e2e/test_node.py (containerd, kubelet, DRA plugin) runs as root, and
  # so do the chart's pods on it (tests/e2e/test_in_cluster.py), from the image the Dockerfile
  # builds (buildah, no Docker engine).
  if [ "$(id -u)" = 0 ]; then bash tests/node/build.sh && bash tests/image/build.sh; fi
else
  echo "tests/run.sh: Go not found; the end-to-end, chart and helm tests will be skipped" >&2
fi

# The shells whose completion scripts the tests load (tests/unit/cli/test_completion.py), from
# Debian, as root; elsewhere a missing one is skipped, except in CI.
if [ "$(id -u)" = 0 ]; then
  shells=()
  for shell in zsh fish; do command -v "$shell" >/dev/null || shells+=("$shell"); done
  if [ "${#shells[@]}" -gt 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${shells[@]}" >/dev/null
  fi
fi

.venv/bin/ruff check app tests tools
.venv/bin/ruff format --check app tests tools
.venv/bin/mypy
.venv/bin/python -m pytest "$@"
