"""The HTTP layer: the app factory, middleware, request dependencies, templates and their filters, views
that shape data for templates, and the routes. It calls services; services never import it."""
