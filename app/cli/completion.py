"""`gpu2dra completion bash|zsh|fish`: a shell completion script written from the argument
parser itself, so that it offers exactly the commands (and a command's own, `nodes plan`),
options and choices gpu2dra takes: an option's choices after it, files after an option that
names one, nothing after one whose value is free (a namespace, a port)."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Iterator
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
    path: tuple[str, ...]  # ("nodes", "plan")
    help: str
    options: tuple[Option, ...]
    positionals: tuple[tuple[str, tuple[str, ...]], ...]  # (name, choices) in order
    commands: tuple[Command, ...]  # its own commands, if it has some

    @property
    def name(self) -> str:
        return self.path[-1]

    def walk(self) -> Iterator[Command]:
        """This command and every one below it, depth first."""
        yield self
        for command in self.commands:
            yield from command.walk()


def _short(text: str | None) -> str:
    """An option's help as a one-line description: its first clause, at most 70 characters."""
    said = " ".join((text or "").split()).replace("%%", "%")
    said = re.split(r" \(|; ", said, maxsplit=1)[0]
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


def _command(path: tuple[str, ...], help: str, parser: argparse.ArgumentParser) -> Command:
    """The command `parser` reads: its options, positionals and commands."""
    commands = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                commands.append(_command((*path, name), _short(helps.get(name)), sub))
    return Command(
        path=path,
        help=help,
        options=tuple(_option(a) for a in parser._actions if a.option_strings),
        positionals=tuple(
            (a.dest, tuple(str(c) for c in a.choices or ()))
            for a in parser._actions
            if not a.option_strings and not isinstance(a, argparse._SubParsersAction)
        ),
        commands=tuple(commands),
    )


def _tree(parser: argparse.ArgumentParser) -> Command:
    """gpu2dra itself, as a command of path (): its options and its commands."""
    return _command((), "", parser)


# ---- bash ------------------------------------------------------------------------------------


def _bash_command(command: Command) -> list[str]:
    valued = [n for o in command.options if o.takes_value for n in o.names]
    lines = [f'        "{" ".join(command.path)}")']
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
    positionals = [" ".join(choices) for _, choices in command.positionals]
    if command.commands:  # its commands come where its first positional would
        positionals = [" ".join(c.name for c in command.commands)]
    words = " ".join(n for o in command.options for n in o.names)
    quoted = " ".join(f'"{p}"' for p in positionals)
    lines += [
        f'            valued="{" ".join(valued)}"',
        f"            positionals=({quoted})",
        f'            words="{words}"',
        "            ;;",
    ]
    return lines


def bash(parser: argparse.ArgumentParser) -> str:
    top = _tree(parser)
    nested = " ".join("/".join(c.path) for c in top.walk() if len(c.path) > 1)
    lines = [
        "# gpu2dra's completion for bash, written by `gpu2dra completion bash`. Load it with",
        "#   source <(gpu2dra completion bash)",
        "# in ~/.bashrc, or save it as /etc/bash_completion.d/gpu2dra.",
        "_gpu2dra() {",
        '    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"',
        '    local command="" i at=0 words="" valued="" skip="" n=0',
        f'    local nested="{nested}"',
        "    local -a positionals=()",
        "    # the command: the first word that is no option; then a command of its own, if any",
        "    for ((i = 1; i < COMP_CWORD; i++)); do",
        '        case "${COMP_WORDS[i]}" in',
        "            -*) ;;",
        "            *)",
        '                if [[ -z "$command" ]]; then',
        '                    command="${COMP_WORDS[i]}"; at=$i',
        '                elif [[ " $nested " == *" ${command// //}/${COMP_WORDS[i]} "* ]]; then',
        '                    command="$command ${COMP_WORDS[i]}"; at=$i',
        "                fi",
        "                ;;",
        "        esac",
        "    done",
        '    case "$command" in',
    ]
    for command in top.walk():
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


def _zsh_command(command: Command, indent: str) -> list[str]:
    """The lines that complete `command`'s arguments, `$words` starting at its name; a command
    with commands of its own describes them, then completes the one chosen."""
    if command.commands:
        depth = len(command.path)
        exclusive = "(- *)" if depth == 0 else None
        specs = [_zsh_option(o, exclusive=exclusive) for o in command.options]
        said = "gpu2dra" + "".join(f" {p}" for p in command.path) + " command"
        lines = [
            f"{indent}local -a commands{depth}",
            f"{indent}commands{depth}=(",
            *(f"{indent}    '{c.name}:{_zsh_quote(c.help)}'" for c in command.commands),
            f"{indent})",
            f"{indent}_arguments -C \\",
            *(f"{indent}    {spec} \\" for spec in specs),
            f"{indent}    '1: :->command{depth}' \\",
            f"{indent}    '*:: :->args{depth}' && return",
            f"{indent}case $state in",
            f"{indent}    command{depth}) _describe -t commands '{said}' commands{depth} ;;",
            f"{indent}    args{depth})",
            f"{indent}        case $words[1] in",
        ]
        for sub in command.commands:
            lines.append(f"{indent}            {sub.name})")
            lines += _zsh_command(sub, indent + " " * 16)
            lines.append(f"{indent}                ;;")
        return [*lines, f"{indent}        esac", f"{indent}        ;;", f"{indent}esac"]
    specs = [_zsh_option(o) for o in command.options]
    for number, (name, choices) in enumerate(command.positionals, 1):
        specs.append(f"'{number}:{name}:{'(' + ' '.join(choices) + ')' if choices else ' '}'")
    return [
        f"{indent}_arguments \\",
        *(f"{indent}    {spec} \\" for spec in specs[:-1]),
        f"{indent}    {specs[-1]}",
    ]


def zsh(parser: argparse.ArgumentParser) -> str:
    lines = [
        "#compdef gpu2dra",
        "# gpu2dra's completion for zsh, written by `gpu2dra completion zsh`. Load it with",
        "#   source <(gpu2dra completion zsh)",
        "# in ~/.zshrc after compinit, or save it as _gpu2dra in a folder of your $fpath.",
        "_gpu2dra() {",
        "    local context state state_descr line",
        "    typeset -A opt_args",
        *_zsh_command(_tree(parser), " " * 4),
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


def _fish_condition(command: Command) -> str:
    """True while the words typed are `command`'s: its path seen, none of its commands yet."""
    if not command.path:
        return "__fish_use_subcommand"
    said = [f"__fish_seen_subcommand_from {name}" for name in command.path]
    if command.commands:
        said.append(f"not __fish_seen_subcommand_from {' '.join(c.name for c in command.commands)}")
    return "; and ".join(said)


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
    lines = [
        "# gpu2dra's completion for fish, written by `gpu2dra completion fish`. Save it with",
        "#   gpu2dra completion fish > ~/.config/fish/completions/gpu2dra.fish",
        "complete -c gpu2dra -f",
    ]
    for command in _tree(parser).walk():
        condition = _fish_quote(_fish_condition(command))
        lines += [_fish_option(_fish_condition(command), o) for o in command.options]
        for c in command.commands:
            lines.append(f"complete -c gpu2dra -n {condition} -a {c.name} -d {_fish_quote(c.help)}")
        for _, choices in command.positionals:
            if choices:
                lines.append(
                    f"complete -c gpu2dra -n {condition} -a {_fish_quote(' '.join(choices))}"
                )
    return "\n".join(lines) + "\n"


SCRIPTS: dict[str, Callable[[argparse.ArgumentParser], str]] = {
    "bash": bash,
    "zsh": zsh,
    "fish": fish,
}
