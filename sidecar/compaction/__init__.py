"""The compaction core: pure functions over lists of events.

Triggers decide when a session must shrink, strategies decide how, and the
boundary rules keep every cut on a turn (or tool-pair) boundary. Nothing here
does I/O except the summarizer call, which is injected.
"""
