"""Domain errors: what services raise instead of HTTP errors. One exception handler in app/web/factory.py maps
them to a status code (and a page or JSON body); services know nothing about HTTP.

FieldError   bad input for one form field (routes usually catch it and show it next to the field)  -> 422
NotFound     the thing does not exist, or exists but the user may not see it (the same answer)     -> 404
Conflict     the request clashes with the thing's current state (not finished yet, changed meanwhile) -> 409
"""

from __future__ import annotations


class DomainError(Exception):
    """Base of the errors a service raises for a request that cannot be served; str() is the user's sentence."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class NotFound(DomainError):
    """Missing, or not visible to this user: both answer the same, so nothing leaks."""


class Conflict(DomainError):
    """The thing exists but its state does not allow this now."""


class FieldError(ValueError):
    """Bad input for one field; routes show `message` next to the field named `field`."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
