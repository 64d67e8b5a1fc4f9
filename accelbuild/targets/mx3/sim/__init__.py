"""Simulation of DFP programs: numeric (what the chip computes) and timing (how fast it computes it)."""
