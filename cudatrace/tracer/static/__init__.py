"""Static scanning of PE and ELF binaries: imports, run-time loading by name, embedded GPU code."""
