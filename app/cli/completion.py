"""`gpu2dra completion bash|zsh|fish`: a shell completion script written from the argument
parser itself, so that it offers exactly the commands, options and choices gpu2dra takes: an
option's choices after it, files after an option that names one, nothing after one whose value
is free (a namespace, a port)."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

SHELLS = ("bash", "zsh", "fish")
_FILE_DESTS = {"filename"}  # -f FILE, whose type is str: it may be - for stdin


@dataclass(frozen=True, slots=True)
class Option:
    names: tuple[str, ...]  # -o, --output
    help: str
    takes_value: bool
    choices: tuple[str, ...]
    files: bool  # its value names a file
    repeatable: bool


@dataclass(frozen=True, slots=True)
class Command:
    name: str
    help: str
    options: tuple[Option, ...]
    positionals: tuple[tuple[str, tuple[str, ...]], ...]  # (name, choices) in order


def _short(text: str | None) -> str:
    """An option's help as a one-line description: its first clause, at most 70 characters."""
    said = " ".join((text or "").split()).replace("%%", "%")
    said = re.split(r" \(|; |: ", said, maxsplit=1)[0]
    return said if len(said) <= 70 else said[:69].rsplit(" ", 1)[0] + "…"


def _option(action: argparse.Action) -> Option:
    return Option(
        names=tuple(action.option_strings),
        help=_short(action.help),
        takes_value=action.nargs != 0,
        choices=tuple(str(c) for c in action.choices or ()),
        files=action.type is Path or action.dest in _FILE_DESTS,
        repeatable=isinstance(action, argparse._AppendAction),
    )


def _tree(parser: argparse.ArgumentParser) -> tuple[tuple[Option, ...], tuple[Command, ...]]:
    """The top-level options, and each command with its options and positionals."""
    top = tuple(_option(a) for a in parser._actions if a.option_strings)
    commands = []
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        helps = {a.dest: a.help or "" for a in action._choices_actions}
        for name, sub in action.choices.items():
            commands.append(
                Command(
                    name=name,
                    help=_short(helps.get(name)),
                    options=tuple(_option(a) for a in sub._actions if a.option_strings),
                    positionals=tuple(
                        (a.dest, tuple(str(c) for c in a.choices or ()))
                        for a in sub._actions
                        if not a.option_strings
                    ),
                )
            )
    return top, tuple(commands)


# ---- bash ------------------------------------------------------------------------------------


def _bash_command(command: Command) -> list[str]:
    valued = [n for o in command.options if o.takes_value for n in o.names]
    lines = [f"        {command.name})"]
    cases = []
    for o in command.options:
        if not o.takes_value:
            continue
        if o.choices:
            said = f'COMPREPLY=($(compgen -W "{" ".join(o.choices)}" -- "$cur")); return ;;'
        elif o.files:
            said = 'COMPREPLY=($(compgen -f -- "$cur")); return ;;'
        else:
            said = "return ;;  # a value of the user's own"
        cases.append(f"                {'|'.join(o.names)}) {said}")
    if cases:
        lines += ['            case "$prev" in', *cases, "            esac"]
    positionals = " ".join(f'"{" ".join(choices)}"' for _, choices in command.positionals)
    lines += [
        f'            valued="{" ".join(valued)}"',
        f"            positionals=({positionals})",
        f'            words="{" ".join(n for o in command.options for n in o.names)}"',
        "            ;;",
    ]
    return lines


def bash(parser: argparse.ArgumentParser) -> str:
    top, commands = _tree(parser)
    first = [c.name for c in commands] + [n for o in top for n in o.names]
    lines = [
        "# gpu2dra's completion for bash, written by `gpu2dra completion bash`. Load it with",
        "#   source <(gpu2dra completion bash)",
        "# in ~/.bashrc, or save it as /etc/bash_completion.d/gpu2dra.",
        "_gpu2dra() {",
        '    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"',
        '    local command="" i at=0 words="" valued="" skip="" n=0',
        "    local -a positionals=()",
        "    for ((i = 1; i < COMP_CWORD; i++)); do",
        '        case "${COMP_WORDS[i]}" in',
        "            -*) ;;",
        '            *) command="${COMP_WORDS[i]}"; at=$i; break ;;',
        "        esac",
        "    done",
        '    case "$command" in',
        f'        "") COMPREPLY=($(compgen -W "{" ".join(first)}" -- "$cur")); return ;;',
    ]
    for command in commands:
        lines += _bash_command(command)
    lines += [
        "        *) return ;;",
        "    esac",
        '    if [[ "$cur" != -* ]]; then',
        "        # the positional being written: the words after the command that are neither",
        "        # options nor their values",
        "        for ((i = at + 1; i < COMP_CWORD; i++)); do",
        '            if [[ -n "$skip" ]]; then skip=""; continue; fi',
        '            case "${COMP_WORDS[i]}" in',
        "                -*=*) ;;",
        '                -*) [[ " $valued " == *" ${COMP_WORDS[i]} "* ]] && skip=1 ;;',
        "                *) n=$((n + 1)) ;;",
        "            esac",
        "        done",
        "        if ((n < ${#positionals[@]})); then",
        '            COMPREPLY=($(compgen -W "${positionals[n]}" -- "$cur"))',
        "            return",
        "        fi",
        "    fi",
        '    COMPREPLY=($(compgen -W "$words" -- "$cur"))',
        "}",
        "complete -F _gpu2dra gpu2dra",
    ]
    return "\n".join(lines) + "\n"


# ---- zsh -------------------------------------------------------------------------------------


def _zsh_quote(text: str) -> str:
    """Text inside a single-quoted _arguments spec: its brackets and colons escaped."""
    return re.sub(r"([\[\]:\\])", r"\\\1", text).replace("'", "'\\''")


def _zsh_option(o: Option, *, exclusive: str | None = None) -> str:
    """An _arguments spec; `exclusive`: what the option excludes (default: its other names)."""
    action = ""
    if o.takes_value:
        what = o.names[-1].lstrip("-")
        if o.choices:
            action = f":{what}:({' '.join(o.choices)})"
        elif o.files:
            action = f":{what}:_files"
        else:
            action = f":{what}: "
    spec = f"[{_zsh_quote(o.help)}]{action}"
    star = "*" if o.repeatable else ""
    if exclusive is None:
        exclusive = "" if o.repeatable or len(o.names) == 1 else f"({' '.join(o.names)})"
    if len(o.names) == 1:
        return f"'{exclusive}{star}{o.names[0]}{spec}'"
    return f"'{exclusive}{star}'{{{','.join(o.names)}}}'{spec}'"


def zsh(parser: argparse.ArgumentParser) -> str:
    top, commands = _tree(parser)
    lines = [
        "#compdef gpu2dra",
        "# gpu2dra's completion for zsh, written by `gpu2dra completion zsh`. Load it with",
        "#   source <(gpu2dra completion zsh)",
        "# in ~/.zshrc after compinit, or save it as _gpu2dra in a folder of your $fpath.",
        "_gpu2dra() {",
        "    local context state state_descr line",
        "    typeset -A opt_args",
        "    local -a commands",
        "    commands=(",
        *(f"        '{c.name}:{_zsh_quote(c.help)}'" for c in commands),
        "    )",
        "    _arguments -C \\",
        *(f"        {_zsh_option(o, exclusive='(- *)')} \\" for o in top),
        "        '1: :->command' \\",
        "        '*:: :->args' && return",
        "    case $state in",
        "        command) _describe -t commands 'gpu2dra command' commands ;;",
        "        args)",
        "            case $words[1] in",
    ]
    for command in commands:
        specs = [_zsh_option(o) for o in command.options]
        for number, (name, choices) in enumerate(command.positionals, 1):
            specs.append(f"'{number}:{name}:{'(' + ' '.join(choices) + ')' if choices else ' '}'")
        lines.append(f"                {command.name})")
        lines.append("                    _arguments \\")
        lines += [f"                        {spec} \\" for spec in specs[:-1]]
        lines.append(f"                        {specs[-1]}")
        lines.append("                    ;;")
    lines += [
        "            esac",
        "            ;;",
        "    esac",
        "}",
        'if [[ "${zsh_eval_context[-1]}" == loadautofunc ]]; then',
        '    _gpu2dra "$@"',
        "else",
        "    compdef _gpu2dra gpu2dra",
        "fi",
    ]
    return "\n".join(lines) + "\n"


# ---- fish ------------------------------------------------------------------------------------


def _fish_quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _fish_option(condition: str, o: Option) -> str:
    parts = ["complete -c gpu2dra", f"-n {_fish_quote(condition)}"]
    for name in o.names:
        parts.append(f"-l {name[2:]}" if name.startswith("--") else f"-s {name[1:]}")
    if o.takes_value:
        if o.choices:
            parts.append(f"-x -a {_fish_quote(' '.join(o.choices))}")
        elif o.files:
            parts.append("-r -F")
        else:
            parts.append("-x")
    parts.append(f"-d {_fish_quote(o.help)}")
    return " ".join(parts)


def fish(parser: argparse.ArgumentParser) -> str:
    top, commands = _tree(parser)
    lines = [
        "# gpu2dra's completion for fish, written by `gpu2dra completion fish`. Save it with",
        "#   gpu2dra completion fish > ~/.config/fish/completions/gpu2dra.fish",
        "complete -c gpu2dra -f",
    ]
    lines += [_fish_option("__fish_use_subcommand", o) for o in top]
    for c in commands:
        lines.append(
            f"complete -c gpu2dra -n __fish_use_subcommand -a {c.name} -d {_fish_quote(c.help)}"
        )
    for c in commands:
        condition = f"__fish_seen_subcommand_from {c.name}"
        lines += [_fish_option(condition, o) for o in c.options]
        for _, choices in c.positionals:
            if choices:
                said = _fish_quote(" ".join(choices))
                lines.append(f"complete -c gpu2dra -n {_fish_quote(condition)} -a {said}")
    return "\n".join(lines) + "\n"


SCRIPTS: dict[str, Callable[[argparse.ArgumentParser], str]] = {
    "bash": bash,
    "zsh": zsh,
    "fish": fish,
}
