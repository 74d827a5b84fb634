"""This project's own studies, beside the package: they judge the selectors on models each never saw and fit the
policy ``select --by auto`` ships, through the study surface the selection engine keeps for them (docs/design.md
names it; ``make reproduce`` runs them)."""
