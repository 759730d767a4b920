"""wirelab benchmark runner and performance commands."""
