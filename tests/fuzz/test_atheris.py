"""Coverage-guided fuzzing (atheris, libFuzzer) of the three entry points that read untrusted
bytes, seeded with the bad-input corpus; a crash fails the test with the input that made it."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.corpus import CORPUS
from tests.support.tools import missing

ROOT = Path(__file__).resolve().parents[2]
MAX_SECONDS = 60  # a busy machine stops early rather than holding CI up
MIN_RUNS = 1_000

# target: (runs, where its seeds are); the runs take 5 to 30 s on the 2-core CI machine
TARGETS = {
    "mutate": (40_000, ["mutate"]),
    "validate": (40_000, ["validate", "mutate"]),
    "translate": (20_000, ["translate"]),
}


@pytest.fixture(scope="module", autouse=True)
def atheris_installed() -> None:
    try:
        import atheris  # noqa: F401
    except ImportError:
        missing("atheris is not installed (pip install -e '.[test]')")


@pytest.mark.parametrize("target", TARGETS)
def test_fuzz(target: str, tmp_path: Path) -> None:
    runs, folders = TARGETS[target]
    seeds = tmp_path / "corpus"  # libFuzzer adds what it finds to the first folder
    seeds.mkdir()
    for folder in folders:
        for path in (CORPUS / folder).iterdir():
            shutil.copy(path, seeds / f"{folder}-{path.name}")
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.fuzz.atheris_targets",
            target,
            f"-runs={runs}",
            f"-max_total_time={MAX_SECONDS}",
            "-seed=1",
            "-timeout=10",  # seconds for one input: a hang is a crash
            "-rss_limit_mb=2048",
            f"-artifact_prefix={tmp_path}/",
            str(seeds),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=MAX_SECONDS + 60,
    )
    crashes = [p.name for p in tmp_path.glob("*-*") if p.is_file()]
    assert run.returncode == 0 and not crashes, (crashes, run.stderr[-4000:])
    done = re.search(r"Done (\d+) runs", run.stderr)
    assert done is not None, run.stderr[-2000:]
    assert int(done.group(1)) >= MIN_RUNS, run.stderr[-2000:]
