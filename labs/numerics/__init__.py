"""Number formats in software: FP8 formats, scaling rules and an emulated FP8 linear layer."""
