"""Performance benchmarks of the lab itself: commands that print figures, not tests."""
