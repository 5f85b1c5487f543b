"""The OAuth 2.1 authorization server: client registration, authorize, token, revoke, discovery, JWKS."""
