"""Standalone lab runners for the course (imports nothing from `app`).

Every lab is a package `labs/<lab>/` with a torch-free `params.py` (Params, resources, limits) and
`result.py` (the model of its results), and a `run.py` (`run(params, ctx)`), registered in
`labs.catalog`; the command line in `labs.cli` wraps them with parameter validation, backend selection,
progress lines, and a `result.json` validated against the result models (labs.result_schema, which also
generates `labs/schema/result.schema.json`: `python -m labs schema`).

    numerics/   fp8.py (formats, quantize, scaling rules), fp8_linear.py (emulated FP8 linear, quantizers)
    parallel/   dist.py (rank launcher), tp.py (Megatron-style mappings), dims.py, comm.py (the communication
                model, shared with the lessons), costmodel.py (predictions)
    trace/      timeline.py (spans, overlap), chart.py (what a chart shows: ticks, labels, palette, markers),
                svgplot.py (charts, timelines as SVG), chrome.py (Chrome trace export)
    <lab>/      params.py, result.py (torch-free) · run.py (model -> parallel -> run) · report.py (summary,
                tables, charts) · checks.py (the grader's automatic checks) · fp8-step also: model.py (GPT),
                te.py (Transformer Engine glue), evidence.py
    checks/     the roll-up of a report item's checks and the checks every lab shares
    memwatch.py summed RSS of a process tree (bench/lab_memory.py calibrates the memory estimates with it)

    python -m labs probe
    python -m labs run env-check --params '{}' --out /tmp/env
"""

SCHEMA_VERSION = 1
