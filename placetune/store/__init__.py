"""The store: every measurement and study in one SQLAlchemy database (SQLite by default)."""

from placetune.store.store import Store
from placetune.store.url import mask_url

__all__ = ["Store", "mask_url"]
