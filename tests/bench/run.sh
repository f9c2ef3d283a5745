#!/usr/bin/env bash
# The webhook benchmark: installs its load generators (Debian's wrk; vegeta, built from the
# Go module proxy), then runs.
#   bash tests/bench/run.sh [--seconds N] [--soak N]
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! command -v wrk >/dev/null; then
  apt-get update -qq && apt-get install -y -qq wrk >/dev/null
fi
[ -x .bin/vegeta ] || GOBIN="$PWD/.bin" go install github.com/tsenart/vegeta/v12@v12.13.0
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
bash tests/k8s/build.sh
exec .venv/bin/python -m tests.bench.bench_webhook "$@"
