"""A 2-D device mesh over nodes: which ranks form each TP and DP group, and whether a group leaves its node.

torch.distributed.device_mesh.init_device_mesh lays ranks out row-major over `mesh_shape` (torch 2.13,
torch/distributed/device_mesh.py: `_MeshLayout.from_sizes_strides(mesh_shape)` with default strides and a
rank map of `torch.arange`), and torchrun numbers ranks node by node (node_rank × nproc_per_node +
local_rank). So with mesh_dim_names ("dp", "tp") the last dimension, TP, varies fastest and each TP group is
one node's consecutive ranks, on NVLink; with ("tp", "dp") each TP group strides across the nodes and its
all-reduces cross the network between them. The figure draws either order: nodes side by side (700 px) and,
for a phone, one under the other (340 px).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from labs.api import PALETTE, svg_open

from ..schema import Rendered
from .base import RED, FigureSpec, Params, finish, text_at, title_line

NODE_W = 340  # one node box: a phone's width


class DeviceMeshParams(Params):
    nodes: int = Field(2, ge=2, le=4, description="Nodes in the job.")
    gpus_per_node: int = Field(8, ge=2, le=8, description="GPUs per node (ranks are numbered node by node).")
    order: Literal["dp,tp", "tp,dp"] = Field(
        "dp,tp", description="mesh_dim_names of init_device_mesh: the last one varies fastest over the ranks."
    )


def mesh_groups(nodes: int, gpus_per_node: int, order: str) -> dict:
    """TP and DP groups (lists of ranks) of a (dp, tp) mesh with tp = gpus_per_node, in the given dim order."""
    world = nodes * gpus_per_node
    tp, dp = gpus_per_node, nodes
    if order == "dp,tp":  # mesh[d][t] = d·tp + t
        tp_groups = [[d * tp + t for t in range(tp)] for d in range(dp)]
        dp_groups = [[d * tp + t for d in range(dp)] for t in range(tp)]
    else:  # mesh[t][d] = t·dp + d
        tp_groups = [[t * dp + d for t in range(tp)] for d in range(dp)]
        dp_groups = [[t * dp + d for d in range(dp)] for t in range(tp)]
    node = [r // gpus_per_node for r in range(world)]

    def crossing(groups: list[list[int]]) -> int:
        return sum(len({node[r] for r in g}) > 1 for g in groups)

    return {
        "tp_groups": tp_groups,
        "dp_groups": dp_groups,
        "tp_crossing": crossing(tp_groups),
        "dp_crossing": crossing(dp_groups),
    }


def draw_device_mesh(p: DeviceMeshParams) -> Rendered:
    g = mesh_groups(p.nodes, p.gpus_per_node, p.order)
    group_of = {r: i for i, grp in enumerate(g["tp_groups"]) for r in grp}
    right = g["tp_crossing"] == 0
    names = '("dp", "tp")' if p.order == "dp,tp" else '("tp", "dp")'
    title = f"init_device_mesh(mesh_dim_names={names}) on {p.nodes} nodes × {p.gpus_per_node} GPUs"
    verdict = (
        "every TP group is one node's GPUs, on NVLink; only the DP groups cross the network"
        if right
        else f"{g['tp_crossing']} TP groups cross the nodes: their all-reduces run over the network"
    )
    alt = (
        f"{p.nodes} nodes of {p.gpus_per_node} GPUs, ranks numbered node by node. With mesh_dim_names {names}, "
        + "; ".join(f"TP group {i}: ranks {', '.join(map(str, grp))}" for i, grp in enumerate(g["tp_groups"]))
        + f". So {verdict}."
    )
    wide = _draw(p, g, group_of, right, names, title, alt, per_row=2)
    narrow = _draw(p, g, group_of, right, names, title, alt, per_row=1)
    rows = [["TP", str(i), " ".join(map(str, grp))] for i, grp in enumerate(g["tp_groups"])] + [
        ["DP", str(i), " ".join(map(str, grp))] for i, grp in enumerate(g["dp_groups"])
    ]
    return finish(
        name="device-mesh",
        title=title,
        svg=wide,
        narrow_svg=narrow,
        alt=alt,
        columns=["group kind", "group", "ranks"],
        rows=rows,
        numbers={
            "tp_crossing": float(g["tp_crossing"]),
            "dp_crossing": float(g["dp_crossing"]),
            "tp_groups": float(len(g["tp_groups"])),
        },
    )


def _draw(p: DeviceMeshParams, g: dict, group_of: dict, right: bool, names: str, title: str, alt: str,
          per_row: int) -> str:  # fmt: skip
    """The mesh with `per_row` node boxes side by side: 2 for a laptop (700 px), 1 for a phone (340 px)."""
    cell, gap, pad, top = 34, 4, 14, 58
    node_w, node_h = NODE_W, cell + 34
    width = per_row * NODE_W + (per_row - 1) * 20
    rows_of_nodes = -(-p.nodes // per_row)
    height = top + rows_of_nodes * (node_h + 14) + 58
    out = svg_open(width, height, title, alt)
    if per_row == 1:  # two short lines: the full call would run past a phone's 340 px
        out.append(title_line(f"init_device_mesh(…, {names})", 10))
        out.append(title_line(f"on {p.nodes} nodes × {p.gpus_per_node} GPUs", 10, 38))
    else:
        out.append(title_line(title, 10, 28))
        top -= 18
    colours = PALETTE[: len(g["tp_groups"])]
    for n in range(p.nodes):
        x0 = (n % per_row) * (node_w + 20) + pad - 6
        y = top + (n // per_row) * (node_h + 14)
        out.append(
            f'<rect x="{x0}" y="{y}" width="{node_w - 2 * pad + 12}" height="{node_h}" rx="8" fill="#f5f5f5" '
            'stroke="#888"/>'
        )
        out.append(text_at(x0 + 6, y + 16, f"node {n} · NVLink inside", fill="#333"))
        for k in range(p.gpus_per_node):
            r = n * p.gpus_per_node + k
            x = x0 + 6 + k * (cell + gap)
            out.append(
                f'<rect x="{x}" y="{y + 24}" width="{cell}" height="{cell}" rx="4" fill="{colours[group_of[r]]}">'
                f"<title>rank {r}: TP group {group_of[r]}</title></rect>"
            )
            out.append(text_at(x + cell / 2, y + 24 + cell / 2 + 5, str(r), anchor="middle", fill="#fff",
                               extra=' font-weight="600"'))  # fmt: skip
    y = top + rows_of_nodes * (node_h + 14) + 6
    out.append(text_at(10, y, "Colour: TP group (one all-reduce per pair of linears).", fill="#333"))
    words = "Right: TP stays on NVLink." if right else "Wrong: TP groups cross the network."
    out.append(text_at(10, y + 18, words, fill="#111" if right else RED, extra=' font-weight="600"'))
    crossing = f"DP groups crossing nodes: {g['dp_crossing']} of {len(g['dp_groups'])}"
    out.append(text_at(10, y + 36, crossing, fill="#333"))
    out.append("</svg>")
    return "\n".join(out)


SPEC = FigureSpec(
    "device-mesh", "TP and DP rank groups of a 2-D device mesh over nodes", DeviceMeshParams, draw_device_mesh
)
