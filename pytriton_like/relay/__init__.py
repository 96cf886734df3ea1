"""The relay between Triton and your process: the wire format both ends speak, its transport
(a Unix socket, shared memory passed as descriptors) and the user-process end's use of them.

The other end is a Triton backend written in C (``native/``, built into
``libtriton_pytriton_like.so``): it runs inside tritonserver and hands each batch to the relay server.
"""
