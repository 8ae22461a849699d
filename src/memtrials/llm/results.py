"""Results and errors of the model client."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class LLMError(RuntimeError):
    """Base class of the model client's errors."""


class CallFailed(LLMError):
    """A call failed after its last retry, or with an error that retrying cannot fix."""


class BudgetExceeded(LLMError):
    """A cost cap was reached; no new paid call is made (everything so far stays recorded)."""


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0


@dataclass(frozen=True)
class ChatResult:
    """One completed chat call (fresh or replayed from the cache)."""

    text: str
    finish_reason: str
    call_id: str
    usage: Usage
    cost: float
    latency_s: float
    attempts: int
    cached: bool
    constraint: str = "none"
    refusal: str = ""
    record: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class JSONResult:
    """A structured answer: ``value`` is the parsed object when ``valid``.

    An answer that does not parse or does not match the schema is *not* an exception:
    it is returned with ``valid=False``, its raw text and the reason, so the study can
    apply its own registered rule and keep the invalid answer.
    """

    value: dict[str, Any] | None
    valid: bool
    raw: str
    error: str | None
    call_id: str
    structured: bool
    finish_reason: str = ""
    chat: ChatResult | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class EmbedResult:
    """Vectors for the texts of one :meth:`Client.embed` call, in the order given.

    ``vectors`` is a float32 array of shape (len(texts), dimension); ``call_ids[i]`` is the
    record of text ``i`` (one record per distinct text: an embedding call is one text,
    and a request to the endpoint batches several); ``cached[i]`` says whether text ``i``
    was replayed from the cache; ``usage`` and ``cost`` count the fresh calls only.
    """

    vectors: Any
    call_ids: list[str]
    cached: list[bool]
    usage: Usage
    cost: float
    model: str
    records: list[dict[str, Any]] = field(default_factory=list, repr=False, compare=False)

    @property
    def dimension(self) -> int:
        return int(self.vectors.shape[1])

    @property
    def fresh(self) -> int:
        """Distinct texts embedded by a fresh call in this call (the rest replayed)."""
        return len({cid for cid, c in zip(self.call_ids, self.cached) if not c})
