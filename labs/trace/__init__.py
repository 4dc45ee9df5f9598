"""Per-rank timelines: spans and overlap arithmetic, SVG drawing, Chrome trace export."""
