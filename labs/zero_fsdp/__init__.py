"""zero-fsdp: one small transformer under DDP, ZeRO-1 and FSDP2, with what each rank holds and moves."""
