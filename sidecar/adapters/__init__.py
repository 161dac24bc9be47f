"""Drop-in adapters that put agents of other frameworks on the compaction sidecar.

``sidecar.adapters.adk`` (extra ``[adk]``): a Google ADK ``BaseSessionService``
backed by the service, and a ``before_model_callback`` for agents that keep
their own session service. ``sidecar.adapters.langchain`` (extra
``[langchain]``): a LangChain v1 ``AgentMiddleware``. ``adk_recall`` and
``langchain_recall``: for each, a ``recall`` tool that searches what
compaction archived. Each module imports its framework, so this package
imports neither: the core install stays free of both frameworks.
"""

from __future__ import annotations
