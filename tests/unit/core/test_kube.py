"""Reading a container's command line (app/core/kube.py), as Go's flag package does."""

from __future__ import annotations

from app.core.kube import command_words, flag_values


def test_every_value_of_a_flag_in_order() -> None:
    words = command_words(
        {
            "command": ["/manager"],
            "args": ["--nodes=1:10:a", "--nodes", "0:3:b", "-nodes=2:4:c", "--nodesx=9", "--v"],
        }
    )
    assert flag_values(words, "nodes") == ["1:10:a", "0:3:b", "2:4:c"]
    assert flag_values(words, "v") == []  # a value flag at the end has none
    assert flag_values(words, "v", boolean=True) == ["true"]
    assert flag_values(["--x=false", "--x"], "x", boolean=True) == ["false", "true"]
