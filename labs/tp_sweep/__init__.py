"""tp-sweep: one MLP block split Megatron-style at several TP degrees, measured and predicted (see run.py)."""
