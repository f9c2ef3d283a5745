"""`gpu2dra completion bash|zsh|fish`: each script, loaded by its own shell, offers what the
parser takes, asked as the shell asks: bash's function called with COMP_WORDS, fish's
`complete -C`, and an interactive zsh on a pseudo-terminal given the line and a TAB. A shell
that is not installed fails in CI (tests/run.sh installs zsh and fish as root) and is skipped
elsewhere."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from app.cli.commands import main
from tests.support.tools import missing

COMMANDS = {
    *("serve", "exporter", "translate", "certs", "doctor", "explain", "report", "impact"),
    *("capacity", "deviceclasses", "quota", "prune-templates", "completion", "version", "nodes"),
}


def _script(shell: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    if shutil.which(shell) is None:
        missing(f"{shell} is not installed: apt-get install {shell}")
    assert main(["completion", shell]) == 0
    path = tmp_path / f"gpu2dra.{shell}"
    path.write_text(capsys.readouterr().out)
    return path


@pytest.fixture
def bash(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    return _script("bash", tmp_path, capsys)


def complete_bash(script: Path, line: str, cwd: Path | None = None) -> list[str]:
    """What bash offers for `line` (the word under the cursor is its last, "" after a
    space), as programmable completion calls the function `complete -F` names."""
    words = line.split(" ")
    run = (
        f"source {shlex.quote(str(script))}\n"
        "spec=$(complete -p gpu2dra); func=${spec#*-F }; func=${func%% *}\n"
        f"COMP_WORDS=({' '.join(shlex.quote(w) for w in words)})\n"
        f"COMP_CWORD={len(words) - 1}\n"
        f"COMP_LINE={shlex.quote(line)}; COMP_POINT={len(line)}\n"
        '"$func" gpu2dra "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"\n'
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    done = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", run],
        capture_output=True,
        text=True,
        check=True,
        cwd=cwd,
    )
    assert done.stderr == ""
    return sorted(w for w in done.stdout.splitlines() if w)


def test_bash_offers_the_commands_then_each_ones_options(bash: Path) -> None:
    assert set(complete_bash(bash, "gpu2dra ")) == COMMANDS
    assert complete_bash(bash, "gpu2dra -") == ["--help", "--version", "-h"]
    assert complete_bash(bash, "gpu2dra rep") == ["report"]
    assert complete_bash(bash, "gpu2dra report --c") == ["--context"]
    assert "--no-headers" in complete_bash(bash, "gpu2dra report -")
    assert "--no-headers" not in complete_bash(bash, "gpu2dra doctor -")


def test_bash_offers_an_options_choices_and_nothing_for_a_free_value(bash: Path) -> None:
    assert complete_bash(bash, "gpu2dra report -o ") == ["csv", "json", "table", "wide", "yaml"]
    assert complete_bash(bash, "gpu2dra report --output w") == ["wide"]
    assert complete_bash(bash, "gpu2dra serve --log-format ") == ["json", "text"]
    assert complete_bash(bash, "gpu2dra report -n ") == []  # a namespace: the user's own
    assert complete_bash(bash, "gpu2dra completion ") == ["bash", "fish", "zsh"]


def test_bash_offers_positionals_in_their_order(bash: Path) -> None:
    assert complete_bash(bash, "gpu2dra explain ") == ["pod"]
    assert complete_bash(bash, "gpu2dra explain -n ml ") == ["pod"]  # ml is -n's value
    assert complete_bash(bash, "gpu2dra explain pod ") == []  # the pod's name: the user's own


def test_bash_offers_a_commands_own_commands_and_their_options(bash: Path) -> None:
    assert complete_bash(bash, "gpu2dra nodes ") == ["convert", "plan"]
    assert "--no-headers" in complete_bash(bash, "gpu2dra nodes plan -")
    assert complete_bash(bash, "gpu2dra nodes plan -o ") == ["json", "text", "yaml"]
    assert "--apply" in complete_bash(bash, "gpu2dra nodes convert --")
    assert "--apply" not in complete_bash(bash, "gpu2dra nodes plan --")


def test_bash_offers_files_after_an_option_that_names_one(bash: Path, tmp_path: Path) -> None:
    (tmp_path / "train.yaml").write_text("")
    assert complete_bash(bash, "gpu2dra translate -f tr", cwd=tmp_path) == ["train.yaml"]
    assert complete_bash(bash, "gpu2dra doctor --kubeconfig tr", cwd=tmp_path) == ["train.yaml"]


def test_fish_offers_what_bash_does(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = _script("fish", tmp_path, capsys)

    def complete(line: str) -> list[str]:
        done = subprocess.run(
            ["fish", "--no-config", "-c", f"source {script}; complete -C {shlex.quote(line)}"],
            capture_output=True,
            text=True,
            check=True,
        )
        return sorted(w.split("\t")[0] for w in done.stdout.splitlines() if w)

    assert set(complete("gpu2dra ")) == COMMANDS
    assert complete("gpu2dra report -o ") == ["csv", "json", "table", "wide", "yaml"]
    assert complete("gpu2dra report --con") == ["--context"]
    assert complete("gpu2dra explain ") == ["pod"]
    assert complete("gpu2dra completion ") == ["bash", "fish", "zsh"]
    assert complete("gpu2dra nodes ") == ["convert", "plan"]
    assert complete("gpu2dra nodes plan --con") == ["--context"]
    assert "--apply" in complete("gpu2dra nodes convert --")


# Asks an interactive zsh (on a pseudo-terminal: zsh/zpty) to complete LINE, every candidate
# its completion adds written to HITS, one call a line: zsh -f capture.zsh SCRIPT LINE HITS
CAPTURE = """
export HITS=$3
zmodload zsh/zpty
zpty z zsh -f -i
zpty -w z "PS1=''; PROMPT=''; RPROMPT=''"
zpty -w z "autoload -U compinit && compinit -u -D"
zpty -w z "source $1"
zpty -w z 'compadd() { local -a h; builtin compadd -O h "$@"; print -r -- $h >> $HITS;'
zpty -w z '    builtin compadd "$@" }'
zpty -w z "print -r -- READY >> $3"
for i in {1..100}; do grep -q '^READY$' $3 2>/dev/null && break; sleep 0.1; done
zpty -n -w z "$2"$'\\t'
size=0 still=0
for i in {1..100}; do
    sleep 0.1
    now=$(wc -c < $3)
    if (( now == size && now > 6 )); then (( ++still >= 5 )) && break; else still=0; fi
    size=$now
done
zpty -d z
"""


def test_zsh_offers_what_bash_does(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = _script("zsh", tmp_path, capsys)
    capture = tmp_path / "capture.zsh"
    capture.write_text(CAPTURE)
    assert subprocess.run(["zsh", "-n", str(script)], check=False).returncode == 0

    def complete(line: str) -> set[str]:
        hits = tmp_path / "hits"
        hits.unlink(missing_ok=True)
        subprocess.run(
            ["zsh", "-f", str(capture), str(script), line, str(hits)], check=True, timeout=60
        )
        said = hits.read_text().split()
        assert said[0] == "READY", said
        return set(said[1:])

    assert complete("gpu2dra rep") == {"report"}
    assert complete("gpu2dra report -o ") == {"table", "wide", "json", "yaml", "csv"}
    assert complete("gpu2dra explain ") == {"pod"}
    assert complete("gpu2dra nodes ") == {"plan", "convert"}
    assert complete("gpu2dra nodes plan --con") == {"--context"}


def test_an_unknown_shell_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["completion", "tcsh"])
    assert exited.value.code == 2
    assert "invalid choice: 'tcsh'" in capsys.readouterr().err
