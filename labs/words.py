"""Counts in words for messages people read ("1 GPU", "2 GPUs"), shared by the labs and the app (torch-free)."""

from __future__ import annotations


def count(n: int, noun: str, plural: str | None = None) -> str:
    """`n` and `noun`, the noun in the plural unless n is 1: count(1, "rank") -> "1 rank"; count(0, "GPU") ->
    "0 GPUs"; count(2, "process", "processes") -> "2 processes"."""
    return f"{n} {noun if n == 1 else (plural or noun + 's')}"
