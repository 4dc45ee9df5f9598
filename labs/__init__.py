"""Standalone lab runners for the course (imports nothing from `app`).

Every lab is a package `labs/<lab>/` with a torch-free `params.py` (Params, resources, limits) and a
`run.py` (`run(params, ctx)`), registered in `labs.catalog`; the command line in `labs.cli` wraps them
with parameter validation, backend selection, progress lines, and a `result.json` validated against
`labs/schema/result.schema.json`.

    numerics/   fp8.py (formats, quantize, scaling rules), fp8_linear.py (emulated FP8 linear, quantizers)
    parallel/   dist.py (rank launcher), tp.py (Megatron-style mappings), dims.py, costmodel.py (predictions)
    trace/      timeline.py (spans, overlap), svgplot.py (charts, timelines), chrome.py (Chrome trace export)
    <lab>/      params.py (torch-free) · run.py (model -> parallel -> run) · report.py (summary, tables,
                charts) · te.py (Transformer Engine glue, fp8-step)

    python -m labs probe
    python -m labs run env-check --params '{}' --out /tmp/env
"""

SCHEMA_VERSION = 1
