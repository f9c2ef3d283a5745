"""What the read-only commands share to read a live cluster and make sense of it: the client
they GET through, gpu2dra's registrations and policy as the cluster holds them, the TLS
handshake the API server makes, selectors evaluated as the scheduler does (`cel/`) and the
known components of a GPU stack. Nothing here writes, and nothing here prints."""
