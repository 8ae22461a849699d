"""ScienceWorld's ambiguity prompts: reading their options, recording an answer as replayable text.

An ambiguity prompt ("Ambiguous request: ... 0:\\t<option> 1:\\t<option>") lists options in an
order that can change between runs, so a numeric answer is not replayable by itself: the
environment (:class:`~memtrials.envs.scienceworld.env.ScienceWorldEnv`) records the chosen
option's text as ``"@option <text>"`` (:data:`OPTION_PREFIX`) and compares recorded prompts by
their options (:func:`same_observation`).
"""

from __future__ import annotations

import re

AMBIGUITY_PREFIX = "Ambiguous request:"
OPTION_PREFIX = "@option "
_OPTION_LINE = re.compile(r"^(\d+):\t(.*)$")


def parse_options(text: str) -> list[str] | None:
    """The option texts of an ambiguity prompt in their listed order, else ``None``."""
    if not text.startswith(AMBIGUITY_PREFIX):
        return None
    options: list[str] = []
    for line in text.splitlines()[1:]:
        m = _OPTION_LINE.match(line)
        if m:
            if int(m.group(1)) != len(options):
                return None
            options.append(m.group(2))
    return options


def same_observation(got: str, recorded: str) -> bool:
    """Equality of observations, where two ambiguity prompts match if they list the same options."""
    if got == recorded:
        return True
    a, b = parse_options(got), parse_options(recorded)
    return a is not None and b is not None and sorted(a) == sorted(b)
