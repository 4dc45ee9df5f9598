"""View models: pure functions that turn lesson content and lab results into what a template renders."""
