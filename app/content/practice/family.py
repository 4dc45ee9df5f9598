"""A family of numeric problems: default parameters (a source's worked numbers), a unit and a solver."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Generator:
    """A family of numeric problems: default parameters (a seed's worked numbers) and a solver."""

    name: str
    defaults: dict[str, Any]
    unit: str
    prompt: str  # a model prompt for authors (the template README shows it); questions write their own
    explanation: str
    solve: Callable[[dict[str, Any]], dict[str, Any]]  # params -> values incl. "answer"
