"""Moved to ..entry_values (below metadata and throttling). Kept for metadata/entry_sizes.py, which a
parallel change reworks: it imports ..entry_values from then on, and this module goes (issue 33)."""

from ..entry_values import EntryValues, LearnedEntries, LearnEntries, changed

__all__ = ["EntryValues", "LearnedEntries", "LearnEntries", "changed"]
