"""``python -m bench.economics``: see ``bench.economics.run``."""

from __future__ import annotations

import sys

from bench.economics.run import main

sys.exit(main())
