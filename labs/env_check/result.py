"""env-check's `results` in result.json (torch-free): the smoke test and the backends this host offers."""

from __future__ import annotations

from typing import Literal

from pydantic import with_config
from typing_extensions import TypedDict

from labs.resources import Backend
from labs.result_common import STRICT, LabResults


@with_config(STRICT)
class SmokeTest(TypedDict):
    device: Literal["cpu", "cuda"]
    matmul_ok: bool


class EnvCheckResults(LabResults):
    smoke_test: SmokeTest
    available_backends: list[Backend]
