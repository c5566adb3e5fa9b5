"""Drivers under test: the reference CCI driver and the mutant drivers that each break one rule."""
