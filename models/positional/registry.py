"""The registry's dict, apart from the package that fills it (``models/positional/__init__.py``), so
that a scheme built over another (randomized positions over a base scheme) can look its base up
without importing the package that imports it."""
from __future__ import annotations

SCHEMES: dict[str, type] = {}  # name -> PositionalEncoding subclass, in the order tables list them

COMBINER = "+"  # joins the schemes of a combination: model.positional.name=learnable+t5


def scheme_parts(name: str) -> list[str]:
    """The schemes a name joins, stripped, in order (``"learnable+t5"`` -> ``["learnable", "t5"]``; one
    scheme -> itself), unchecked against the registry: the one place a combined name is split."""
    return [part.strip() for part in name.split(COMBINER)]
