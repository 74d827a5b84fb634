"""The one exception type for mistakes a user can fix; the CLI prints it as a single line and exits 2."""

from __future__ import annotations


class UserError(Exception):
    """A bad input (model, task, layer, data folder, option): the message names the fix."""


def first_line(err: BaseException) -> str:
    """The first line of an exception's message (its type name when it has none): what a one-line error quotes."""
    text = str(err).strip() or type(err).__name__
    return text.splitlines()[0]
