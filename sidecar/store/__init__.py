"""Stores: the versioned event log behind the engine."""
