"""Models a user can pull by name: the catalogue, the pull, and where pulled ones live."""

from voice.catalog.entries import (
    Entry,
    entry_for_model,
    installed_dir,
    load_catalog,
    lookup,
    models_dir,
)

__all__ = ["Entry", "entry_for_model", "installed_dir", "load_catalog", "lookup", "models_dir"]
