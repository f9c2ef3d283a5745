#!/usr/bin/env bash
# The end-to-end benchmark: the device plugin, gpu2dra and the in-tree path (KEP-5004) on one
# control plane of the newest release. Sets up .venv and builds the control plane (a no-op when
# current), then runs; arguments go to the benchmark (--help lists them).
#   bash tests/bench/e2e.sh [--seconds N] [--rates 5,50,200] [--job-pods N] [--json FILE]
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
bash tests/k8s/build.sh "$(find tests/k8s -mindepth 2 -maxdepth 2 -path '*/v*/go.mod' | cut -d/ -f3 | sort -rV | head -1)"
exec .venv/bin/python -m tests.bench.e2e "$@"
