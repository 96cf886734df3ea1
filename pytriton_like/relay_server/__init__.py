"""The user-process side of the relay: receive a batch, run the callable, send the results."""
