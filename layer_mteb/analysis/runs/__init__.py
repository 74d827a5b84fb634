"""Run folders read back (scores, metrics, settings) and others' results imported into the same tables."""
