"""Evidence gathering: static (scan files) and dynamic (trace a running process)."""
