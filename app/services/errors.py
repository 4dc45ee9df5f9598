"""The one error shape services raise for bad input: the form field and a message in the user's terms."""

from __future__ import annotations


class FieldError(ValueError):
    """Bad input for one field; routes show `message` next to the field named `field`."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
