"""The registry's dict, apart from the package that fills it (``models/positional/__init__.py``), so
that a scheme built over another (randomized positions over a base scheme) can look its base up
without importing the package that imports it."""
from __future__ import annotations

SCHEMES: dict[str, type] = {}  # name -> PositionalEncoding subclass, in the order tables list them
