"""Dynamic tracing with Frida: the agent inside the target, the host session outside."""
