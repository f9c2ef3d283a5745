"""`gpu2dra <command> --help` says every option's default, as the reference does."""

from __future__ import annotations

import argparse

import pytest

from app.cli.arguments import parser


def _commands() -> dict[str, argparse.ArgumentParser]:
    top = parser()
    [sub] = [a for a in top._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def _shown(command: argparse.ArgumentParser, action: argparse.Action) -> str:
    """The lines `--help` gives one option, as one line."""
    formatter = command._get_formatter()
    formatter.add_argument(action)
    return " ".join(formatter.format_help().split())


@pytest.mark.parametrize("name", sorted(_commands()))
def test_every_default_is_said(name: str) -> None:
    command = _commands()[name]
    for action in command._actions:
        if not action.option_strings or action.default in (None, argparse.SUPPRESS, []):
            continue
        shown = _shown(command, action)
        if action.nargs == 0:  # a flag (--offline, --no-headers): it takes no value
            assert "default" not in shown, shown
        else:
            assert "(default: " in shown, f"{name}: {shown}"


def test_the_default_follows_the_text() -> None:
    commands = _commands()
    serve = " ".join(commands["serve"].format_help().split())
    assert "HTTPS port to listen on (default: 8443)" in serve
    assert "rolling restarts) (default: 0.0)" in serve  # a zero is a default too
    prune = " ".join(commands["prune-templates"].format_help().split())
    assert "is stored (default: 1h)" in prune
    # A text that says its default keeps its own words, once.
    assert "policy file (default: embedded) --" in serve
