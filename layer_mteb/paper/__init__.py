"""The paper regenerated from the authors' released per-layer results (``layer-mteb reproduce``)."""
