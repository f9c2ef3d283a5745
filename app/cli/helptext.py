"""How `gpu2dra --help` reads: every option's default said after its text."""

from __future__ import annotations

import argparse
from typing import Any


class ShowDefaults(argparse.HelpFormatter):
    """Each option's help ends with `(default: X)` where it has a default and its text does not
    already say one; a flag (it takes no value), an option without a default and an empty list
    say nothing."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help
        default = action.default
        if (
            not text
            or text is argparse.SUPPRESS
            or not action.option_strings
            or action.nargs == 0
            or default is None
            or default is False
            or default is argparse.SUPPRESS
            or default == []
            or "default" in text
        ):
            return text
        return f"{text} (default: %(default)s)"


class Parser(argparse.ArgumentParser):
    """An argument parser whose help shows the defaults; its subcommands' parsers are too."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", ShowDefaults)
        super().__init__(*args, **kwargs)
