"""One module per kind, the shared lifecycle and the ruleset engine."""
