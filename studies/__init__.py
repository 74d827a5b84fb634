"""This project's own studies, beside the package: they judge the selectors on models each never saw and fit the
policy ``select --by auto`` ships, using only the public ``layer_mteb`` API (``make reproduce`` runs them)."""
