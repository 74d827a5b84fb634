"""One CSV table of a run folder as declared (:class:`Table`: its columns, row order, key and float format) and what
every table shares: the columns naming a layer (:class:`LayerId`), the checked reading of its file
(:func:`read_table`) and the update that keeps every stored row a new one does not replace (:func:`replace_rows`).

A feature declares its own table beside the code that makes its rows (``METRICS_TABLE`` in :mod:`layer_mteb.metrics`,
...), naming its file; :class:`~layer_mteb.common.run_folder.RunFolder` reads and updates it in a folder. A setting
added to the package after a table was written reads as its default (the behaviour its rows were made with), so an
old table stays readable. pandas loads where a frame is built, not on import.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, TypedDict

from layer_mteb.common.config import METRIC_SETTINGS, SETTINGS, SETTINGS_COLUMNS
from layer_mteb.common.errors import UserError, first_line

if TYPE_CHECKING:
    from pathlib import Path

    import pandas as pd


class LayerId(TypedDict):
    """Which layer of which model a row is about: the first columns of scores and metrics alike."""

    model: str
    revision: str
    layer: int
    n_layers: int
    relative_depth: float


LAYER_COLUMNS = tuple(LayerId.__annotations__)


def layer_columns(model, layer: int) -> LayerId:
    """The :class:`LayerId` of a row about ``layer`` of ``model``."""
    return LayerId(
        model=model.name,
        revision=model.revision,
        layer=layer,
        n_layers=model.n_layers,
        relative_depth=layer / model.n_layers,
    )


class Table(NamedTuple):
    """A table of the folder: the columns it must hold, what makes it (said where it is missing or torn, ``{folder}``
    the folder), and for a table that commands update, the row order that makes a rewrite give the same file, the key
    (rows of equal key are one measurement: a newer row replaces the stored one, every other stored row stays) and how
    its floats are written."""

    columns: list[str]
    fix: str
    order: Sequence[str] = ()
    key: Sequence[str] = ()
    floats: str | None = "%.8g"  # 8 significant digits keep distinct values distinct (mutual k-NN: steps >= 1e-5)
    file: str = ""  # its file, for a table its feature declares (read with RunFolder.read, updated with .update)
    reading: tuple[tuple[str, Any], ...] = ()  # pandas' read_csv arguments beside the columns
    #: columns added since the table's first files were written, with the value a row written before reads as
    added: tuple[tuple[str, Any], ...] = ()

    @property
    def row_key(self) -> tuple[str, ...]:
        """The columns naming one row: its key and its order (a row repeated by merged runs is one row)."""
        return tuple(dict.fromkeys([*self.key, *self.order]))

    def tidy(self, rows: list[dict] | pd.DataFrame) -> pd.DataFrame:
        """Rows -> the table's frame: its columns in order, rows sorted so reruns write identical files."""
        import pandas as pd

        frame = pd.DataFrame(self.with_added(_with_settings(pd.DataFrame(rows), self.columns)), columns=self.columns)
        return frame.sort_values(list(self.order), kind="stable").reset_index(drop=True)

    def with_added(self, frame: pd.DataFrame) -> pd.DataFrame:
        """``frame`` with each :attr:`added` column it lacks, at the value rows written before it read as."""
        return frame.assign(**{column: value for column, value in self.added if column not in frame.columns})


def _with_settings(frame: pd.DataFrame, columns: Sequence[str] = ()) -> pd.DataFrame:
    """``frame`` with every setting, where it records some: one added since its rows were made is its default, the
    behaviour they were made with (a new setting defaults to what the package did before it). A metric setting
    (:data:`~.config.METRIC_SETTINGS`) is added only to a table whose ``columns`` hold it."""
    if not any(name in frame.columns for name in SETTINGS_COLUMNS):
        return frame
    wanted = [*SETTINGS, *(s for s in METRIC_SETTINGS if s.name in columns)]
    return frame.assign(**{s.name: s.default for s in wanted if s.name not in frame.columns})


def read_table(path: Path, columns: Sequence[str], fix: str, **read: Any) -> pd.DataFrame:
    """``path`` read as a table with ``columns``: a torn or undecodable file, or one lacking a column, is one
    :class:`UserError` line naming the file and ``fix``, never a traceback or a table silently taken as empty; a
    setting added since it was written reads as its default (:func:`_with_settings`)."""
    import pandas as pd

    try:
        frame = pd.read_csv(path, **read)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, EOFError, OSError) as err:
        raise UserError(f"cannot read {path}: {first_line(err)}; {fix}") from None
    frame = _with_settings(frame, columns)
    missing = sorted(set(columns) - set(frame.columns))
    if missing:
        raise UserError(f"{path} is missing column(s) {missing}; {fix}")
    return frame


def replace_rows(old: pd.DataFrame, new: pd.DataFrame, key: Sequence[str]) -> pd.DataFrame:
    """``old`` updated with ``new``: a stored row whose ``key`` a new row holds is replaced, every other stays (what
    every table of a run folder does on writing, so a run of one part never drops another part's rows)."""
    import pandas as pd

    if old.empty:
        return new.reset_index(drop=True)
    held = set(new[list(key)].astype(str).apply(tuple, axis=1))
    replaced = old[list(key)].astype(str).apply(tuple, axis=1).isin(held)
    return pd.concat([old[~replaced], new], ignore_index=True)
