"""Pure ASGI middleware: the admission gate, request body limits and security headers."""
