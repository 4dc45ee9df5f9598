"""Tensor-parallel degrees as one validated object whose errors show the arithmetic (torch-free)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TPDims:
    degree: int
    hidden: int
    ffn: int

    def problems(self) -> list[str]:
        out = []
        if self.degree < 1:
            out.append(f"degree({self.degree}) must be >= 1")
        else:
            # fc1 is split by output rows and fc2 by input columns: both along ffn.
            if self.ffn % self.degree:
                out.append(f"ffn({self.ffn}) % degree({self.degree}) = {self.ffn % self.degree}, must be 0")
        return out

    def check(self) -> TPDims:
        problems = self.problems()
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @property
    def ffn_parallel(self) -> int:
        return self.ffn // self.degree
