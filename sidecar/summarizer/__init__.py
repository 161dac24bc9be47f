"""Summarizers: the protocol the summarizing strategy calls, and its implementations."""
