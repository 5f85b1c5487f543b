"""Imported integrations: an OpenAPI service's operations as governed handlers `integration_call/<app>/...`.

docs/integrations.md describes them; `openapi.py` compiles a description into operations, `runtime.py` puts
them in the registry of every process, `upstream.py` calls the service for a caller's organization.
"""
