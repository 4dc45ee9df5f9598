"""Figures are drawn at build time, carry a text alternative, and show exactly the numbers calc computes."""

import re
import xml.etree.ElementTree as ET

import pytest

from app.content import calc, figures
from app.content.loader import validate_lesson_texts
from tests.conftest import ROOT

SVG = "{http://www.w3.org/2000/svg}"
MEMORY = {"configs": [{"label": "DDP, 8 GPUs", "dp": 8}, {"label": "ZeRO-3, 8 GPUs", "dp": 8, "zero": 3}]}
DEFAULTS = {name: (MEMORY if name == "memory-anatomy" else {}) for name in figures.FIGURES}


def _parse(svg: str) -> ET.Element:
    root = ET.fromstring(svg)  # well-formed XML, so every author string was escaped
    assert root.tag == f"{SVG}svg" and root.get("role") == "img"
    kids = list(root)
    assert kids[0].tag == f"{SVG}title" and kids[0].text.strip()
    assert kids[1].tag == f"{SVG}desc" and len(kids[1].text) > 40
    return root


def test_the_template_readme_lists_every_figure_in_order():
    """lessons/_template/README.md's figure table is FIGURES, name and line for authors, in the same order, so a new
    figure cannot be left out of the page authors start from."""
    readme = (ROOT / "lessons" / "_template" / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Figures", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^\| `([a-z0-9-]+)` \| (.+?) \|$", section, flags=re.M)
    assert listed == [(name, spec.about) for name, spec in figures.FIGURES.items()]


@pytest.mark.parametrize("name", sorted(figures.FIGURES))
def test_every_figure_draws_with_a_text_alternative(name):
    drawn = figures.render(name, DEFAULTS[name], "fig-x")
    root = _parse(drawn.svg)
    assert drawn.name == name and drawn.title and len(drawn.alt) > 60
    assert drawn.rows and all(len(r) == len(drawn.columns) for r in drawn.rows)
    assert drawn.numbers
    texts = [t for t in root.iter(f"{SVG}text") if "".join(t.itertext()).strip()]
    assert len(texts) >= 5, "labels are real <text>, not paths"
    # marker ids are scoped by the figure id, so several figures can share a page
    ids = [el.get("id") for el in root.iter() if el.get("id")]
    assert all(i.startswith("fig-x-") for i in ids), ids


def test_number_line_numbers_match_calc():
    d = figures.render("fp8-number-line", {"amax": 240, "values": [120, 300]}, "f")
    scale = calc.fp8_scale(240)["scale"]
    assert d.numbers["scale"] == scale
    for v in (120, 300):
        m = calc.fp8_map(v, scale=scale)
        assert d.numbers[f"scaled_{v}"] == m["scaled"] and d.numbers[f"stored_{v}"] == m["stored"]
    assert d.numbers["stored_300"] == 448 and d.numbers["e5m2_max"] == 57344
    assert ["E4M3", "126", "0.001953", "0.01562", "448"] == d.rows[0]  # 2⁻⁹ smallest subnormal, 2⁻⁶ normal
    assert "560 → 448" in d.svg and "clipped to 448" in d.alt


def test_step_timeline_numbers_match_calc_and_the_lab_metrics():
    d = figures.render("step-timeline", {"compute": 12, "comm": 5, "overlap": 3}, "f")
    s = calc.step_time(12, 5, 3)
    assert (d.numbers["step"], d.numbers["hidden"], d.numbers["exposed"]) == (s["total"], s["hidden"], s["exposed"])
    assert d.numbers["overlap_ratio"] == s["overlap_ratio"]
    assert "12 + 5 − 3 = 14 ms" in d.title
    with pytest.raises(figures.FigureError) as exc:
        figures.render("step-timeline", {"compute": 2, "comm": 5, "overlap": 3}, "f")
    assert exc.value.problems[0][1] == "overlap <= min(compute, comm) = 2"


@pytest.mark.parametrize("sp", [False, True])
def test_tp_block_numbers_match_calc(sp):
    d = figures.render("tp-mlp-block", {"sequence_parallel": sp}, "f")
    c = calc.tp_layer_collectives(8192, 4096, 8, sequence_parallel=sp)
    assert d.numbers == {k: float(v) for k, v in c.items()}
    words = ("all-gather", "reduce-scatter") if sp else ("all-reduce", "identity")
    assert all(w in d.svg for w in words) and "column-parallel" in d.svg.lower() + d.alt.lower()


def test_ring_figures_match_calc():
    t = figures.render("ring-traffic", {"max_gpus": 64}, "f")
    assert t.numbers == {f"factor_{n}": calc.ring_allreduce(1.0, n)["factor"] for n in (2, 4, 8, 16, 32, 64)}
    r = figures.render("ring-time", {"size_mb": 1000, "alpha_us": 5, "gpus": [8, 1024]}, "f")
    for n in (8, 1024):
        expected = calc.ring_time(1e9, n, calc.node_figures("H100-SXM")["link_bytes_per_s"], 5e-6)
        assert r.numbers[f"ms_{n}"] == pytest.approx(expected["ms"], rel=1e-12)
        assert r.numbers[f"latency_ms_{n}"] == pytest.approx(expected["latency_ms"], rel=1e-12)


def test_roofline_matches_calc_and_the_cost_model():
    from labs.parallel.costmodel import NODES

    node = NODES["H100-SXM"]
    d = figures.render("tp-roofline", {"ffn": 14336, "degrees": [2, 4, 8]}, "f")
    # The ridges are the datasheet's: peak FLOP/s ÷ NVLink bytes/s, BF16 ≈ 2,198 and FP8 ≈ 4,398 on H100.
    assert d.numbers["mfu"] == 1.0
    assert d.numbers["ridge_bf16"] == pytest.approx(node.peak_bf16_flops / node.link_bytes_per_s)
    assert d.numbers["ridge_fp8"] == pytest.approx(node.peak_fp8_flops / node.link_bytes_per_s)
    assert round(d.numbers["ridge_bf16"]) == 2198 and round(d.numbers["ridge_fp8"]) == 4398
    for n in (2, 4, 8):
        forward = calc.tp_mlp_intensity(14336, n, node="H100-SXM")["intensity"]
        assert d.numbers[f"intensity_{n}"] == pytest.approx(1.5 * forward)  # a step: 3× the FLOPs, 2× the bytes
    assert d.numbers["intensity_8"] == pytest.approx(3072)
    # Over a step at peak, TP=8 is compute-bound in BF16 and communication-bound in FP8: the text's story.
    assert d.numbers["comm_bound_bf16_8"] == 0 and d.numbers["comm_bound_fp8_8"] == 1
    assert "datasheet peak" in d.title and "arithmetic intensity" in d.alt and "2,198" in d.svg
    assert "1.5·F/(N−1)" in d.svg and "not measured" in d.svg
    # a phone layout, 340 px wide, with the same ridges and intensities
    narrow = _parse(d.narrow_svg)
    assert narrow.get("viewBox").startswith("0 0 340 ")
    texts = " ".join("".join(t.itertext()) for t in narrow.iter(f"{SVG}text"))
    assert "ridge: 2,198 FLOP/B" in texts and "ridge: 4,398 FLOP/B" in texts
    assert "TP=8: 3,072 FLOP/B · BF16 compute, FP8 comm" in texts
    # The forward alone is F/(N−1): TP=8 falls under the BF16 ridge there, which is why the step matters.
    f = figures.render("tp-roofline", {"per": "forward"}, "f")
    assert f.numbers["intensity_8"] == pytest.approx(14336 / 7) and f.numbers["comm_bound_bf16_8"] == 1
    # At 50% MFU both ridges halve and TP=8 is compute-bound in both precisions.
    h = figures.render("tp-roofline", {"mfu": 0.5}, "f")
    assert h.numbers["ridge_fp8"] == pytest.approx(d.numbers["ridge_fp8"] / 2) and h.numbers["comm_bound_fp8_8"] == 0
    assert "50% MFU" in h.title


def test_roofline_text_tells_the_figure_story(l06):
    body = " ".join(next(b for _, b in l06.blocks("section") if b.id == "collective-costs").body.split())
    fig = l06.figures["tp-roof"]
    assert "arithmetic intensity" in body and "1.5\\,F/(N-1)" in body
    assert f"{fig.numbers['ridge_bf16']:,.0f}" in body and f"{fig.numbers['ridge_fp8']:,.0f}" in body
    assert "compute-bound in BF16, communication-bound in FP8" in body
    assert fig.numbers["comm_bound_bf16_8"] == 0 and fig.numbers["comm_bound_fp8_8"] == 1
    assert "MFU = 100%" in body


def test_memory_figure_matches_calc_and_escapes_labels():
    d = figures.render("memory-anatomy", {"configs": [{"label": "<b>DDP</b>", "dp": 8}]}, "f")
    m = calc.memory_per_gpu(7e9, 32, 4096, 32, 4096, 1, dp=8, recompute="selective")
    assert d.numbers["total_0"] == m["total_gb"] and d.numbers["activations_0"] == m["activations_gb"]
    assert "<b>" not in d.svg and "&lt;b&gt;DDP&lt;/b&gt;" in d.svg
    _parse(d.svg)


def test_memory_figure_has_a_phone_layout_with_the_same_numbers():
    d = figures.render("memory-anatomy", {"configs": [{"label": "<b>DDP</b>", "dp": 8}, *MEMORY["configs"]]}, "f")
    narrow = _parse(d.narrow_svg)
    assert narrow.get("viewBox").startswith("0 0 340 ")  # a phone's column, drawn at about its own size
    texts = ["".join(t.itertext()) for t in narrow.iter(f"{SVG}text")]
    wide = ["".join(t.itertext()) for t in _parse(d.svg).iter(f"{SVG}text")]
    totals = [f"{d.numbers[f'total_{i}']:.1f} GB" for i in range(3)]
    assert all(t in texts and t in wide for t in totals)  # every bar's total, on both
    assert "<b>DDP</b>" in texts and "80 GB per GPU" in texts
    # its bars are the wide drawing's: the same segments, named the same
    assert [r.findtext(f"{SVG}title") for r in narrow.iter(f"{SVG}rect") if r.find(f"{SVG}title") is not None] == [
        r.findtext(f"{SVG}title") for r in _parse(d.svg).iter(f"{SVG}rect") if r.find(f"{SVG}title") is not None
    ]
    # a figure drawn for a phone's width in the first place has no second layout
    assert figures.render("zero-stages", {}, "z").narrow_svg == ""


def _texts(root: ET.Element) -> str:
    """Every label of a drawing, joined; the no-break spaces that keep "14 ms" on one line read as spaces."""
    return " | ".join("".join(t.itertext()) for t in root.iter(f"{SVG}text")).replace("\xa0", " ")


@pytest.mark.parametrize("name", sorted(figures.FIGURES))
def test_every_figure_wider_than_a_phone_has_a_phone_layout(name):
    """Drawn 340 px wide, with the wide drawing's title and description (one of the two is display: none, so a
    screen reader meets them once), its own scoped marker ids, and no label under 12 px: shown in a 390 px phone's
    ~335 px column, 12 px text is ~11.8 px on screen."""
    drawn = figures.render(name, DEFAULTS[name], "fig-x")
    assert bool(drawn.narrow_svg) == (drawn.width > 400), drawn.width
    if not drawn.narrow_svg:
        return
    wide, narrow = _parse(drawn.svg), _parse(drawn.narrow_svg)
    assert narrow.get("viewBox").startswith("0 0 340 ")
    assert [narrow[0].text, narrow[1].text] == [wide[0].text, wide[1].text]
    ids = [el.get("id") for el in narrow.iter() if el.get("id")]
    assert all(i.startswith("fig-x-n-") for i in ids), ids
    assert len([t for t in narrow.iter(f"{SVG}text") if "".join(t.itertext()).strip()]) >= 5
    sizes = [float(el.get("font-size")) for el in narrow.iter() if el.get("font-size")]
    assert min(sizes) >= 12, sizes


def test_phone_layouts_show_the_wide_drawings_numbers():
    line = figures.render("fp8-number-line", {"amax": 240, "values": [120, 300]}, "f")
    texts = _texts(_parse(line.narrow_svg))
    assert all(w in texts for w in ("560 → 448", "| 224 |", "max 448", "max 57,344", "240 = 1.867"))
    step = figures.render("step-timeline", {"compute": 12, "comm": 5, "overlap": 3}, "f")
    texts = _texts(_parse(step.narrow_svg))
    assert all(w in texts for w in ("12 + 5 − 3 = 14 ms", "compute (GEMMs)", "hidden 3 ms", "exposed", "wait 2 ms"))
    assert "| 14 |" in texts  # the step's end is on the time axis
    for sp, words in ((False, ("forward identity", "backward all-reduce")), (True, ("forward all-gather", "X₁"))):
        block = figures.render("tp-mlp-block", {"sequence_parallel": sp}, "f")
        texts = _texts(_parse(block.narrow_svg))
        assert all(w in texts for w in (*words, "A₁ (column slice)", "B₀ (row slice)", "470 MB sent per GPU"))
    ring = figures.render("ring-time", {"size_mb": 1000, "alpha_us": 5}, "f")
    texts = _texts(_parse(ring.narrow_svg))
    assert all(w in texts for w in ("total", "bandwidth term", "latency term 2(p−1)·α", "1,000", "450 GB/s"))
    traffic = _texts(_parse(figures.render("ring-traffic", {"max_gpus": 64}, "f").narrow_svg))
    assert "2(p−1)/p" in traffic and "limit 2×" in traffic and "| 1.75 |" in traffic


def test_a_phone_timeline_names_short_spans_under_their_lane_without_collisions():
    """Spans too short for their name are named under the lane, a second line when two would touch."""
    d = figures.render("step-timeline", {"compute": 12, "comm": 5, "overlap": 3}, "f")
    root = _parse(d.narrow_svg)
    y = {"".join(t.itertext()): float(t.get("y")) for t in root.iter(f"{SVG}text")}
    assert y["compute (GEMMs)"] < y["communication"] + 20  # fits inside its bar
    assert y["communication"] < y["hidden 3 ms"] < y["exposed"] < y["wait"]  # under the lane, on two lines


# ---------------------------------------------------------------- figures in lessons


def test_shipped_figures_are_drawn_once_per_version(course):
    drawn = {(lid, fid): f for lid, les in course.lessons.items() for fid, f in les.figures.items()}
    names = {f.name for f in drawn.values()}
    assert names == set(figures.FIGURES), "every figure kind teaches somewhere"
    for lesson in course.lessons.values():
        refs = [b for _, b in lesson.blocks("figure")] + [f for _, b in lesson.blocks("section") for f in b.figures]
        assert {r.id for r in refs} == set(lesson.figures)


def test_worked_example_figures_show_the_lesson_numbers(l06):
    line, step = l06.figures["fp8-grid"], l06.figures["step-14ms"]
    assert line.numbers["scale"] == l06.values["worked-scale"]["scale"]
    assert line.numbers["scaled_300"] == l06.values["worked-spike"]["scaled"]
    assert step.numbers["step"] == l06.values["worked-step"]["total"]
    assert step.numbers["exposed"] == l06.values["worked-step"]["exposed"]


def _with_part(template_texts, block: str) -> dict:
    part = template_texts["parts/first-part.yaml"].rstrip() + "\n" + block
    return {**template_texts, "parts/first-part.yaml": part}


def test_unknown_figure_is_a_content_error_with_file_and_line(template_texts):
    texts = _with_part(template_texts, "  - kind: figure\n    id: pic\n    name: fp8-numberline\n")
    lesson, errors = validate_lesson_texts(texts, lesson_id="broken")
    assert lesson is None
    (e,) = [e for e in errors if e.field.endswith(".name")]
    assert e.file == "broken/parts/first-part.yaml" and e.found == "'fp8-numberline'"
    assert "fp8-number-line" in e.expected and e.line == texts["parts/first-part.yaml"].count("\n")


def test_bad_figure_parameter_names_the_parameter(template_texts):
    block = "  - kind: figure\n    id: pic\n    name: ring-time\n    params: {alpha_us: -1, colour: red}\n"
    texts = _with_part(template_texts, block)
    _, errors = validate_lesson_texts(texts, lesson_id="broken")
    fields = {e.field: e for e in errors}
    assert (
        "blocks[3].params.alpha_us" in fields
        and "greater than or equal to 0" in fields["blocks[3].params.alpha_us"].expected
    )
    assert "a parameter of ring-time" in fields["blocks[3].params.colour"].expected
    assert fields["blocks[3].params.alpha_us"].line == texts["parts/first-part.yaml"].count("\n")


def test_figure_ids_are_unique_in_a_lesson(template_texts):
    block = "  - {kind: figure, id: pic, name: ring-traffic}\n  - {kind: figure, id: pic, name: ring-traffic}\n"
    _, errors = validate_lesson_texts(_with_part(template_texts, block), lesson_id="broken")
    assert any("an id unique in the lesson" in e.expected for e in errors)


@pytest.mark.parametrize("order", ["dp,tp", "tp,dp"])
def test_device_mesh_groups_are_torchs(order):
    """The groups drawn are the ones torch's device mesh builds (torch/distributed/_mesh_layout.py, 2.13)."""
    import torch
    from torch.distributed._mesh_layout import _MeshLayout

    from app.content.figures.device_mesh import mesh_groups

    shape = (2, 8) if order == "dp,tp" else (8, 2)
    mesh = _MeshLayout.from_sizes_strides(shape).remap_to_tensor(torch.arange(16))[0]  # (dp, tp) or (tp, dp)
    tp_dim = 1 if order == "dp,tp" else 0
    torch_tp = sorted(sorted(g.tolist()) for g in mesh.unbind(1 - tp_dim))
    torch_dp = sorted(sorted(g.tolist()) for g in mesh.unbind(tp_dim))
    g = mesh_groups(2, 8, order)
    assert sorted(map(sorted, g["tp_groups"])) == torch_tp and sorted(map(sorted, g["dp_groups"])) == torch_dp
    d = figures.render("device-mesh", {"order": order}, "m")
    assert d.numbers["tp_crossing"] == (0 if order == "dp,tp" else 2)
    assert d.numbers["dp_crossing"] == (8 if order == "dp,tp" else 0)
    assert d.width == 700 and d.narrow_svg.startswith("<svg") and 'viewBox="0 0 340 ' in d.narrow_svg
    assert ("Right: TP stays on NVLink." in d.svg) == (order == "dp,tp") == ("Right:" in d.narrow_svg)
