"""The command lines of scripts/: one module per script, its usage in its
docstring (also its --help), its entry point main(argv=None) -> int."""
