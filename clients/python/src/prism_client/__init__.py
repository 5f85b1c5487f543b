"""The official Python client of Prism."""

from prism_client.aio import AsyncPrismClient
from prism_client.client import PrismClient
from prism_client.errors import (
    AuthenticationError,
    BadRequestError,
    ConflictError,
    NotFoundError,
    OversightRequiredError,
    PayloadTooLargeError,
    PermissionDeniedError,
    PrismAPIError,
    PrismConnectionError,
    PrismError,
    PrismTimeoutError,
    RateLimitError,
    ServerError,
    WebhookSignatureError,
)
from prism_client.retries import GENERATED_KEY, IdempotencyKey, RetryPolicy
from prism_client.webhooks import construct_event, sign, verify_signature

__version__ = "0.4.0"
__all__ = [
    "GENERATED_KEY", "AsyncPrismClient", "AuthenticationError", "BadRequestError", "ConflictError",
    "IdempotencyKey", "NotFoundError", "OversightRequiredError", "PayloadTooLargeError", "PermissionDeniedError",
    "PrismAPIError", "PrismClient", "PrismConnectionError", "PrismError", "PrismTimeoutError", "RateLimitError",
    "RetryPolicy", "ServerError", "WebhookSignatureError", "construct_event", "sign", "verify_signature",
]
