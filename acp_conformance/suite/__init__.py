"""The bundled conformance suites (collected by the plugin, not by our own tests)."""
