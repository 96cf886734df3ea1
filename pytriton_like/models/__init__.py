"""Bound models: their repository entries, their relay servers and worker processes, their life in the server."""
