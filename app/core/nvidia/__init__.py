"""What NVIDIA's stack means, for translation: GPU Feature Discovery's node labels and the
CEL that selects the same devices (gfd.py, gfd_cel.py), MIG profiles as the device plugin and
the DRA driver spell them (mig.py). Another vendor's labels and names go in a package of its
own beside this one; its resources' mappings to DeviceClasses go in the policy."""
