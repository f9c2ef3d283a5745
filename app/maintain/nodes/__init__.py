"""`gpu2dra nodes convert`: a node's GPUs moved from the device plugin to the DRA driver, or
back, in place (cordon, drain, switch the stack's labels, wait, uncordon)."""
