"""The paper regenerated from the authors' released per-layer results (``python -m layer_mteb.paper``)."""
