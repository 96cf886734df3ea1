"""The tritonserver process: its options and command line, start, readiness, control calls, drain and stop.

Nothing here knows of bound models (``models/``) or of ``Triton`` (``triton.py``), which uses these.
"""

__all__: list = []
