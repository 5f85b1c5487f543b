"""Storage: engines, sessions and everything that depends on the database engine (SQLite or PostgreSQL)."""

from prism.storage.database import Database
from prism.storage.engines import StorageOptions, backend_of, normalize_url, one_shot_engine
from prism.storage.errors import DatabaseUnavailable, unavailable_error
from prism.storage.sqlite import long_writes

__all__ = ["Database", "DatabaseUnavailable", "StorageOptions", "backend_of", "long_writes", "normalize_url",
           "one_shot_engine", "unavailable_error"]
