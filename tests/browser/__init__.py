"""Real-browser tests (a package, so that the server and browser fixtures are package-scoped)."""
