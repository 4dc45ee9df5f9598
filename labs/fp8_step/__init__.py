"""fp8-step: one seeded GPT trained twice, BF16 reference vs an FP8 recipe (see run.py)."""
