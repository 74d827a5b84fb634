"""The one exception type for mistakes a user can fix; the CLI prints it as a single line and exits 2."""

from __future__ import annotations


class UserError(Exception):
    """A bad input (model, task, layer, data folder, option): the message names the fix."""
