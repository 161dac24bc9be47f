"""Every block of the documents that a test runs, by name.

``test_every_block_is_run_or_says_why`` holds this list equal to the blocks
that carry no ``<!-- not run: ... -->`` line, and each name to a test using it.
"""

from __future__ import annotations

from tests.docs.markdown import Example

# README.md
_TOUR = "## A five-minute tour"
TOUR_APPEND = Example("README.md", _TOUR, "sh", 0)
TOUR_CONTEXT = Example("README.md", _TOUR, "sh", 1)
TOUR_COMPACTION = Example("README.md", _TOUR, "sh", 2)
TOUR_INSPECT = Example("README.md", _TOUR, "sh", 3)
TOUR_RESTORE = Example("README.md", _TOUR, "sh", 4)
README_PYTHON = Example("README.md", "## Clients", "python")
README_TS = Example("README.md", "## Clients", "ts")
README_GO = Example("README.md", "## Clients", "go")
README_JAVA = Example("README.md", "## Clients", "java")
ADK_SESSION_SERVICE = Example("README.md", "## Adapters: Google ADK and LangChain", "python", 0)
LANGCHAIN_MIDDLEWARE = Example("README.md", "## Adapters: Google ADK and LangChain", "python", 1)
LAYOUT = Example("README.md", "## Layout", "")

# docs/semantics.md, docs/security.md
POLICY_YAML = Example("docs/semantics.md", "## Policy documents", "yaml")
TOKENS_SINGLE_TENANT = Example("docs/security.md", "## Bearer tokens and tenants", "", 0)
TOKENS_MULTI_TENANT = Example("docs/security.md", "## Bearer tokens and tenants", "", 1)

# docs/adapters.md
_RECALL = "## Recall: the agent searches what compaction moved out"
_TRY = "## Try one without an agent or a key"
TRY_ADK = Example("docs/adapters.md", _TRY, "python", 0)
TRY_ADK_OUTPUT = Example("docs/adapters.md", _TRY, "", 0)
TRY_LANGCHAIN = Example("docs/adapters.md", _TRY, "python", 1)
TRY_LANGCHAIN_OUTPUT = Example("docs/adapters.md", _TRY, "", 1)
ADAPTERS_ADK_SESSION_SERVICE = Example("docs/adapters.md", "## Google ADK", "python", 0)
ADAPTERS_ADK_CALLBACK = Example("docs/adapters.md", "## Google ADK", "python", 1)
ADAPTERS_LANGCHAIN_MIDDLEWARE = Example("docs/adapters.md", "## LangChain v1", "python")
ADAPTERS_ADK_RECALL = Example("docs/adapters.md", _RECALL, "python", 0)
ADAPTERS_LANGCHAIN_RECALL = Example("docs/adapters.md", _RECALL, "python", 1)
ADAPTERS_ADK_CACHE = Example("docs/adapters.md", "### Prompt caching", "python", 0)
ADAPTERS_LANGCHAIN_CACHE = Example("docs/adapters.md", "### Prompt caching", "python", 1)

# the clients' READMEs
PYTHON_INSTALL = Example("clients/python/README.md", "# Python client", "sh")
PYTHON_TEN_LINES = Example("clients/python/README.md", "## Ten lines", "python")
TS_PACK = Example("clients/typescript/README.md", "## Install", "sh", 0)
TS_INSTALL = Example("clients/typescript/README.md", "## Install", "sh", 1)
TS_EXAMPLE = Example("clients/typescript/README.md", "## Ten lines", "ts")
TS_RUN = Example("clients/typescript/README.md", "## Ten lines", "sh")
GO_TEN_LINES = Example("clients/go/README.md", "## Ten lines", "go")
GO_INSTALL = Example("clients/go/README.md", "## Ten lines", "sh", 0)
GO_RUN = Example("clients/go/README.md", "## Ten lines", "sh", 1)
GO_ERRORS = Example("clients/go/README.md", "## Errors, deadlines and cancellation", "go")
JAVA_INSTALL = Example("clients/java/README.md", "## Install", "sh")
JAVA_POM = Example("clients/java/README.md", "## Install", "xml")
JAVA_TEN_LINES = Example("clients/java/README.md", "## Ten lines", "java")
JAVA_BUILD = Example("clients/java/README.md", "## Ten lines", "sh", 0)
JAVA_RUN = Example("clients/java/README.md", "## Ten lines", "sh", 1)
JAVA_ERRORS = Example("clients/java/README.md", "## Errors, deadlines, cancellation", "java")

ALL: tuple[Example, ...] = tuple(v for v in dict(globals()).values() if isinstance(v, Example))
