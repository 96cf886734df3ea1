"""Bound models: their repository entries, their workers, their life in the server."""
