"""Replication: REPL DUMP on the source, REPL LOAD and REPL STATUS on the target, and verification."""
