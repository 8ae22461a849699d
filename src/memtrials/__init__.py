"""MemTrials: a reproducible pipeline for how LLM agents use their history and memory."""

__version__ = "0.1.0"
