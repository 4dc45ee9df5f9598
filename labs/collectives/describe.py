"""collectives' runs in the lesson's words (torch-free): what a learner's run did, read from that run alone (its
α-β fit and, on emulated nodes, what each node sent), or that it ran as one node. The app shows these through the
catalog (LabSpec.words)."""

from __future__ import annotations

from labs.spec import RunWords
from labs.words import byte_size, ms, number


def sentences(results: dict, params: dict) -> list[str]:
    """A finished run's `results` told beside the lesson's worked example."""
    ranks = results.get("ranks") or params.get("ranks")
    out: list[str] = []
    for sweep in results.get("sweeps") or []:
        fits = [
            f"{c['name']} α = {number(c['fit']['alpha_us'], 3)} µs, B = {number(c['fit']['bandwidth_gbs'], 2)} GB/s"
            for c in sweep.get("collectives") or []
            if c.get("fit")
        ]
        if fits:
            out.append(
                f"Your run's fit over {ranks} ranks ({sweep.get('algorithm', 'ring')}): " + "; ".join(fits) + "."
            )
            break
    topo = results.get("topology") or {}
    h = results.get("hierarchy")
    if topo.get("mode") == "netns" and h:
        e = h.get("egress") or {}
        sent = (
            f"; each node sent {byte_size(e['measured_hierarchical_bytes'])} (predicted "
            f"{byte_size(e['predicted_hierarchical_bytes'])}) against {byte_size(e['measured_flat_bytes'])} flat "
            f"(predicted {byte_size(e['predicted_flat_bytes'])})."
            if e.get("measured_flat_bytes") is not None
            else "."
        )
        out.append(
            f"Its {topo['nodes']} emulated nodes ({topo['ranks_per_node']} ranks each, {number(topo['link_mbit'] or 0)} "
            f"Mbit/s links) all-reduced {byte_size(h['bytes'])} hierarchically in {ms(h['hierarchical_ms'])} "
            f"against {ms(h['flat_ms'])} flat" + sent
        )
    else:
        why = topo.get("note") or "the run asked for one node"
        out.append(
            f"It ran as one node ({why}), so it has no cross-node numbers yet: the Two nodes, a slow link preset "
            "splits the ranks into emulated nodes."
        )
    return out


WORDS = RunWords(
    nudge="with two emulated nodes to fit α and B to your own ranks and count the bytes each node sends",
    sentences=sentences,
)
