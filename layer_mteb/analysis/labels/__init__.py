"""Layers picked from K labelled examples per task, and the label-budget curve (how many labels a pick needs)."""
