"""What a translated pod still gets outside its claims: GPU device nodes mounted from the host,
and network devices whose NUMA alignment with the GPUs came from the Topology Manager.

Device nodes: under DRA the claim's GPUs reach the container through CDI; the runtime
(containerd, CRI-O) adds their device nodes and allows them in the container's device cgroup.
A hostPath volume of `/dev/nvidia*` only bind-mounts files: an unprivileged container is
denied opening a GPU its cgroup does not allow, as under the device plugin, and a privileged
one opens every GPU of the node, as before, whatever the claim holds. So the pod is
translated and the mount named: it gives nothing the claim does not, and hides nothing.

Topology: the kubelet's Topology Manager aligns on one NUMA node the devices of the device
plugins that give hints (GPUs, RDMA NICs, SR-IOV VFs, EFA). The DRA manager gives it no
hints, so a GPU moved to a claim is placed without regard to the NICs still served by a
device plugin. What keeps them together under DRA is one claim for both, with
`matchAttribute` on an attribute both drivers publish (the PCIe root, or the NUMA node).
"""

from __future__ import annotations

from collections.abc import Iterator

from app.core.kube import Obj
from app.core.outcomes import Code, Finding
from app.core.resources import container_label, containers

GPU_NODES = "/dev/nvidia"  # /dev/nvidia0, /dev/nvidiactl, /dev/nvidia-uvm, /dev/nvidia-caps


def host_gpu_mounts(spec: Obj) -> Iterator[Finding]:
    """A note for each hostPath volume that mounts NVIDIA device nodes (or all of /dev)."""
    volumes = spec.get("volumes")
    for volume in volumes if isinstance(volumes, list) else ():
        host = volume.get("hostPath") if isinstance(volume, dict) else None
        path = host.get("path") if isinstance(host, dict) else None
        if isinstance(path, str) and _gpu_nodes(path):
            yield Finding(Code.HOST_GPU_DEVICES, volume=volume.get("name"), path=path)


def _gpu_nodes(path: str) -> bool:
    clean = "/" + "/".join(p for p in path.split("/") if p)
    return clean in ("/dev", "/dev/") or clean.startswith(GPU_NODES)


# Device-plugin resources of NICs whose plugins give the Topology Manager NUMA hints: RDMA
# (k8s-rdma-shared-dev-plugin's rdma/*), AWS EFA, SR-IOV VFs (the SR-IOV network device
# plugin's default intel.com/ and openshift.io/ prefixes) and NVIDIA's NIC resources.
_NIC_PREFIXES = ("rdma/", "vpc.amazonaws.com/efa", "intel.com/", "openshift.io/")
_NVIDIA_NIC = ("mlnx", "mellanox", "rdma", "sriov", "hostdev", "nic")


def network_devices(resources: object) -> list[str]:
    """The NIC resources of a container's limits and requests, by name."""
    found: set[str] = set()
    for field in ("limits", "requests"):
        held = resources.get(field) if isinstance(resources, dict) else None
        for name in held if isinstance(held, dict) else ():
            if isinstance(name, str) and _is_nic(name):
                found.add(name)
    return sorted(found)


def _is_nic(name: str) -> bool:
    if name.startswith(_NIC_PREFIXES):
        return True
    domain, _, rest = name.partition("/")
    return domain == "nvidia.com" and any(word in rest.lower() for word in _NVIDIA_NIC)


def unaligned(spec: Obj) -> Iterator[Finding]:
    """A note for each container that keeps device-plugin NICs beside GPUs moved to claims."""
    for field, _, container in containers(spec):
        nics = network_devices(container.get("resources"))
        if nics:
            who = container_label(field, container)
            yield Finding(Code.NUMA_ALIGNMENT, who=who, resources=", ".join(nics))
