"""Real JVM peers fetched from Maven Central with pinned versions into ``var/peers/`` (a cache, gitignored)."""
