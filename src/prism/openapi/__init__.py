"""OpenAPI descriptors: the tenant tool surface (3.0.3) and the developer API (3.1.0)."""
