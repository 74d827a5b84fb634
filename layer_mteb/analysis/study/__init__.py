"""Selector studies that judge each selector on models it never saw, and the ``auto`` policy they ship."""
