"""Settings, read once from the environment (prefix ``PRISM_``)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


def _default_database_url() -> str:
    # `prism serve` run in an empty directory keeps its SQLite file there.
    return f"sqlite+aiosqlite:///{Path.cwd() / 'prism.db'}"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="PRISM_", extra="ignore")

    database_url: str = Field(default_factory=_default_database_url)
    redis_url: str | None = None
    base_domain: str = "localhost"
    public_scheme: str = "http"
    public_port: int | None = None
    # Extra handler modules to load ("mypkg.handlers,other.mod"), on top of the `prism.apps` entry points.
    apps: str = ""
    # How long a verified API key is trusted from the in-process cache before it is looked up again.
    # A revocation (today made by the CLI, another process) takes effect within this window.
    credential_cache_seconds: float = 5.0
    # last_used_at is written at most this often per key, never once per request.
    key_touch_interval_seconds: float = 60.0
    seed_demo: bool = True
    log_level: str = "info"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
