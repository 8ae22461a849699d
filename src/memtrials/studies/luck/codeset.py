"""The source files the luck study's freeze hashes: every module of the study, every
``memtrials`` module they import (each imported name followed to the module that defines
it, through re-exports, transitively: :func:`memtrials.pipeline.codesets.defining_closure`),
and the model-layer files that build requests (*Lessons from Luck*, section 3.5: the frozen
package holds "the runner and serving code ... the registered analysis code").

Imports are read from the source (``ast``), not executed, so the list is cheap to compute
when Snakemake parses the workflow.  Modules that only run a rule (logging, the config
loader, the client's session plumbing) are left out by :data:`NOT_PROTOCOL`; what they
would change is either in the config slice or refused elsewhere.
"""

from __future__ import annotations

from functools import lru_cache

from memtrials.pipeline.codesets import SRC, defining_closure

PACKAGE = SRC / "memtrials" / "studies" / "luck"
REPO = SRC.parent
PARTS = ("worlds", "freeze", "writers", "readers", "analysis", "report")
"""The parts of the study's rules; the study is frozen as one unit, so each depends on the
whole protocol code (:func:`memtrials.studies.luck.freeze.code_files`)."""

# the model layer that turns the study's messages into requests: parameters, the schema
# text appended for endpoints without structured output, the cache key
REQUEST_FILES = ("memtrials/llm/client.py", "memtrials/llm/structured.py", "memtrials/llm/cache/keys.py")
# imported by the study, but not protocol: rule plumbing (the rule runner; the study
# interface its workflow helper subclasses), config parsing (its values are frozen in the
# slice), the client's session/recording/limits (A's model layer beyond request building)
NOT_PROTOCOL = ("memtrials.cells", "memtrials.pipeline.rule_entry", "memtrials.pipeline.study", "memtrials.config",
                "memtrials.llm", "memtrials.pipeline.workload")  # workload: what `estimate` counts, no protocol


# modules of the study that read its registered outputs after the fact, not protocol: the
# scorecard's headline (memtrials.pipeline.scorecard) reads the registered analysis
AFTER_THE_FACT = ("headline.py",)
# the known-answer run (issue 38): the planted agent and its run are not the registered protocol
# (workflow.py's config check imports the planted agent; the freeze does not follow it there)
KNOWN_ANSWER = ("planted.py", "known.py")
KNOWN_MODULES = tuple(f"memtrials.studies.luck.{n[:-3]}" for n in KNOWN_ANSWER)

# inside an excluded package, but protocol: the prompt loader reads the exact texts sent
PROTOCOL_INSIDE = ("memtrials.config.prompts",)


def protocol(module: str) -> bool:
    """Whether the freeze follows ``module`` (not in :data:`NOT_PROTOCOL`, or in :data:`PROTOCOL_INSIDE`)."""
    if module in PROTOCOL_INSIDE:
        return True
    if module in KNOWN_MODULES:
        return False
    return not any(module == m or module.startswith(m + ".") for m in NOT_PROTOCOL)


@lru_cache(maxsize=1)
def protocol_files() -> tuple[str, ...]:
    """Repository-relative paths of every hashed source file, sorted."""
    files = defining_closure(sorted(p for p in PACKAGE.glob("*.py")
                                    if p.name not in AFTER_THE_FACT + KNOWN_ANSWER), protocol)
    files.update(SRC / p for p in REQUEST_FILES)
    return tuple(sorted(p.relative_to(REPO).as_posix() for p in files))


@lru_cache(maxsize=1)
def known_files() -> tuple[str, ...]:
    """The known-answer run's source files: the protocol's and the planted agent's closure."""
    files = defining_closure([PACKAGE / n for n in KNOWN_ANSWER], lambda m: m in KNOWN_MODULES or protocol(m))
    return tuple(sorted({*protocol_files(), *(p.relative_to(REPO).as_posix() for p in files)}))
