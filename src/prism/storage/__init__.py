"""Storage: engines, sessions and everything that depends on the database engine (SQLite or PostgreSQL)."""

from prism.storage.database import Database, normalize_url, one_shot_engine

__all__ = ["Database", "normalize_url", "one_shot_engine"]
