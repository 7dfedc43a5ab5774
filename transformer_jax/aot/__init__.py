"""Ahead-of-time compilation for accelerators this machine does not have (`targets`: the chips
and compile-only devices for them)."""
