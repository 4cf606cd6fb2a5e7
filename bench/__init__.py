"""Benchmarks that print measured figures (not timed tests); run each as a script."""
