"""Context economics: what whole sessions cost under each policy and each provider's cache rules.

``python -m bench.economics`` (``make bench-economics``); see ``bench.economics.run``.
"""
