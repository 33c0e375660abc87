"""Renderers: each turns one result document into text. Reports never open binaries, start Frida or touch SQL."""
