"""The relay's stub side and what both sides share (wire format, shared memory, request types).

Everything here imports only the stdlib, numpy and zmq, with relative imports: the package is
copied into each model's folder and imported by Triton's Python-backend stub.
"""
