"""Standalone lab runners for the course (imports nothing from `app`).

Every lab is one folder `labs/<lab>/` that declares itself in `spec.py` (`SPEC = LabSpec(...)`, labs/spec.py);
labs.catalog finds the folders, so nothing else lists labs (docs/architecture.md, "Add a lab"). Beside the spec:
torch-free `params.py` (Params, resources, limits, tolerances) and `result.py` (the model of its results),
`run.py` (`run(params, ctx)`), `report.py`, `checks.py` (the grader's checks) and its golden bundle, `golden/`.
The command line in `labs.cli` wraps them with parameter validation, backend selection, progress lines, and a
`result.json` validated against the result models (labs.result_schema, which also generates
`labs/schema/result.schema.json`: `python -m labs schema`).

    numerics/   fp8.py (formats, quantize, scaling rules), fp8_linear.py (emulated FP8 linear, quantizers)
    parallel/   dist.py (rank launcher: run_ranks), tp.py (Megatron-style mappings), dims.py, comm.py (the
                communication model, shared with the lessons), costmodel.py (predictions)
    trace/      timeline.py (spans, overlap), chart.py (what a chart shows: ticks, labels, palette, markers),
                svgplot.py (charts, timelines as SVG), chrome.py (Chrome trace export)
    <lab>/      spec.py, params.py, result.py (torch-free) · run.py (model -> parallel -> run) · report.py
                (summary, tables, charts) · checks.py (the grader's automatic checks) · describe.py (its runs in
                the lesson's words) · golden/ · fp8-step also: model.py (GPT), te.py (Transformer Engine glue),
                evidence.py
    spec.py     LabSpec, what a lab declares; catalog.py finds them (and COURSE_LAB_PATH's lab folders)
    params.py   the base of every lab's Params, and the fields and rules every lab of ranks declares alike
    checks/     the roll-up of a report item's checks and the checks every lab shares
    memwatch.py summed RSS of a process tree (bench/lab_memory.py calibrates the memory estimates with it)

    python -m labs probe
    python -m labs run env-check --params '{}' --out /tmp/env
"""

SCHEMA_VERSION = 1
