#!/usr/bin/env bash
# The webhook benchmark: installs its load generators (Debian's wrk and hey), then runs.
#   bash tests/bench/run.sh [--seconds N] [--soak N]
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! command -v wrk >/dev/null || ! command -v hey >/dev/null; then
  apt-get update -qq && apt-get install -y -qq wrk hey >/dev/null
fi
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
bash tests/k8s/build.sh
exec .venv/bin/python -m tests.bench.bench_webhook "$@"
