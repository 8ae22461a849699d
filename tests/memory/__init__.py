"""Tests of the memory systems (memtrials.memory)."""
