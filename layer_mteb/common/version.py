"""The package's version, read from its installed metadata: pyproject.toml is the one place it is written."""

from __future__ import annotations

from importlib import metadata

try:
    VERSION = metadata.version("layer_mteb")
except metadata.PackageNotFoundError:  # a source tree on sys.path that was never installed
    VERSION = "0+unknown"
