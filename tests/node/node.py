"""A real node for the end-to-end tests: containerd, runc, the kubelet and a fake NVIDIA DRA
kubelet plugin (tests/node/plugin), all host processes, joined to the e2e control plane; or,
with `daemonsets`, a fake NVIDIA device plugin and the DRA plugin, each run while the node's
labels select it (DaemonSets).

tests/node/build.sh builds them into <GPU2DRA_BIN or .bin>/node, the kubelet and the plugins
once per Kubernetes release (node/v1.37/kubelet): a node joins a control plane of its own
release, as the version-skew policy forbids a kubelet newer than its apiserver.
RealNode.start() writes the configurations under work_dir, starts containerd (CRI with CDI
on), imports the local pause and busybox images, starts the kubelet as REAL_NODE_NAME and the
plugin with the device inventory it is given, and waits until the Node is Ready and its
ResourceSlice is published (with `daemonsets`: until it offers nvidia.com/gpu). stop()
removes what the node ran and wrote: the pods' containers, every process it started (by
PID), the mounts under work_dir, and the paths outside it that the kubelet, containerd and CNI
create (only those that did not exist before start).

Needs root and Linux. The node uses the machine's own non-loopback IPv4 address (the kubelet
rejects a loopback node IP), the kubelet's fixed ports 10250 and 10248, a bridge named
NODE_BRIDGE and 10.88.0.0/16 for pod IPs. Pods must use `imagePullPolicy: Never` with
BUSYBOX_IMAGE: nothing is ever pulled.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import yaml

from tests.node.relay import Relay

Obj = dict[str, Any]

BUILD_HINT = "tests/node/build.sh"
NODE_BINARIES = ("containerd", "containerd-shim-runc-v2", "ctr")
DRA_PLUGIN = "gpu-kubelet-plugin"
DEVICE_PLUGIN = "gpu-device-plugin"
RELEASE_BINARIES = ("kubelet", DRA_PLUGIN, DEVICE_PLUGIN)  # in bin_dir/<release>
IMAGES = ("pause", "busybox")
PAUSE_IMAGE = "localhost/pause:1"
BUSYBOX_IMAGE = "localhost/busybox:1"
RUNC = Path("/usr/sbin/runc")
CNI_BIN_DIR = Path("/usr/lib/cni")
NODE_BRIDGE = "gpu2dra0"
POD_SUBNET = "10.88.0.0/16"
KUBELET_PORT = 10250
DRIVER = "gpu.nvidia.com"
# The node selectors of the GPU Operator's device plugin DaemonSet and of the DRA driver chart's
# kubelet plugin as gpu2dra's gpu-operator preset sets them (app/core/conversion.py).
SELECTORS = {
    DEVICE_PLUGIN: ("nvidia.com/gpu.deploy.device-plugin", "true"),
    DRA_PLUGIN: ("nvidia.com/dra-driver.deploy", "true"),
}
# The kubelet's device manager listens here whatever its --root-dir.
DEVICE_PLUGIN_DIR = Path("/var/lib/kubelet/device-plugins")
CONTAINERD_NAMESPACE = "k8s.io"
# Written by the kubelet, containerd or CNI whatever their configured directories: removed at
# stop when they did not exist at start.
FIXED_PATHS = (
    Path("/var/lib/kubelet"),
    Path("/var/log/containers"),
    Path("/var/log/pods"),
    Path("/var/lib/cni"),
    Path("/run/containerd"),
    Path("/var/run/netns"),
)
CGROUP_ROOT = Path("/sys/fs/cgroup")
# The `kubernetes` Service's ClusterIP, what pods are told the API server is.
SERVICE_IP = "10.0.0.1"
IP_FORWARD = Path("/proc/sys/net/ipv4/ip_forward")


class NodeError(RuntimeError):
    pass


class ControlPlaneLike(Protocol):
    """What the node needs of tests.support.controlplane.ControlPlane."""

    @property
    def kubeconfig(self) -> Path: ...

    @property
    def server(self) -> str: ...

    def write_node_kubeconfig(self, path: Path) -> None: ...


def missing_node_tools(bin_dir: Path, release: str) -> list[str]:
    """What tests/node/build.sh should have made or installed for a node of `release` (e.g.
    "v1.34") but is not there."""
    missing = [n for n in NODE_BINARIES if not os.access(bin_dir / n, os.X_OK)]
    missing += [
        f"{release}/{n}" for n in RELEASE_BINARIES if not os.access(bin_dir / release / n, os.X_OK)
    ]
    missing += [
        f"images/{n}.tar" for n in IMAGES if not (bin_dir / "images" / f"{n}.tar").is_file()
    ]
    host = (RUNC, *(CNI_BIN_DIR / p for p in ("bridge", "host-local", "loopback")))
    missing += [str(p) for p in host if not p.exists()]
    return missing


def node_ip() -> str:
    """The first global-scope IPv4 address of this machine (no traffic is sent anywhere)."""
    done = subprocess.run(
        ["ip", "-4", "-json", "addr", "show", "scope", "global"],
        capture_output=True,
        text=True,
        check=True,
    )
    for link in json.loads(done.stdout):
        if link.get("ifname") == NODE_BRIDGE:
            continue
        for address in link.get("addr_info", []):
            if address.get("family") == "inet":
                return str(address["local"])
    raise NodeError("no global IPv4 address for the node (the kubelet refuses loopback)")


def _die_with_parent() -> None:
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class RealNode:
    """containerd + kubelet + the plugins in work_dir; logs in work_dir/logs."""

    def __init__(
        self,
        bin_dir: Path,
        work_dir: Path,
        plane: ControlPlaneLike,
        *,
        name: str,
        release: str,
        devices: Sequence[Obj],
        api: Any,
        start_timeout: float = 120.0,
        pod_network: bool = False,
        consumable_shares: str = "",
        daemonsets: bool = False,
    ) -> None:
        """`pod_network`: pods reach the host and the API server, as the chart's webhook
        pods must (the host routes to pod IPs through the bridge, pods route through it, and
        SERVICE_IP:443 on the host relays to the API server). `release`: the control plane's,
        e.g. "v1.34", whose kubelet and plugins run. `daemonsets`: the node registers with the
        GPU Operator's device-plugin label and DaemonSets runs each plugin while the node's
        labels select it (so it starts on the device plugin, offering nvidia.com/gpu);
        otherwise the DRA plugin runs from start to stop."""
        self.bin_dir = bin_dir
        self.release = release
        self.work_dir = work_dir
        self.plane = plane
        self.name = name
        self.devices = list(devices)
        self.api = api  # kubernetes.client.ApiClient with admin rights
        self.start_timeout = start_timeout
        self.pod_network = pod_network
        self._relay: Relay | None = None
        self._ip_forward = ""
        self._service_ip_added = False
        # The plugin's --consumable-shares: its devices shared as the NVIDIA driver shares them.
        self.consumable_shares = consumable_shares
        self.daemonsets: DaemonSets | None = None
        self._follow_labels = daemonsets
        self.ip = ""
        self.log_dir = work_dir / "logs"
        self.pod_logs = work_dir / "pod-logs"
        self.cdi_dir = work_dir / "cdi"
        self.kubelet_root = work_dir / "kubelet"
        self._containerd_dir = work_dir / "containerd"
        self._socket = self._containerd_dir / "containerd.sock"
        self._processes: list[tuple[str, subprocess.Popen[bytes]]] = []
        self._absent_at_start: list[Path] = []
        self._bridge_existed = True
        self._cgroups_existed = True

    # -- start ---------------------------------------------------------------------------------

    def start(self) -> None:
        missing = missing_node_tools(self.bin_dir, self.release)
        if missing:
            raise NodeError(f"missing {', '.join(missing)} in {self.bin_dir}: run {BUILD_HINT}")
        if os.geteuid() != 0:
            raise NodeError("a real node needs root (mounts, cgroups, network namespaces)")
        self._absent_at_start = [p for p in FIXED_PATHS if not p.exists()]
        self._bridge_existed = Path(f"/sys/class/net/{NODE_BRIDGE}").exists()
        self._cgroups_existed = bool(_kubepods_cgroups())
        self.ip = node_ip()
        with socket.socket() as probe:
            try:
                probe.bind((self.ip, KUBELET_PORT))
            except OSError as error:
                raise NodeError(
                    f"{self.ip}:{KUBELET_PORT} is taken ({error}): a kubelet still running?"
                ) from error
        _forget_device_plugins()
        for directory in (self.log_dir, self.cdi_dir, self.kubelet_root, self._containerd_dir):
            directory.mkdir(parents=True, exist_ok=True)
        try:
            if self.pod_network:
                self._start_service_relay()
            self._start_containerd()
            self._import_images()
            self._start_kubelet()
            if self._follow_labels:
                self.daemonsets = DaemonSets(self)
            else:
                self._spawn(DRA_PLUGIN, self.plugin_args(DRA_PLUGIN))
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def _start_service_relay(self) -> None:
        """SERVICE_IP on lo with host scope (a global one would become the node's IP), and a
        relay from SERVICE_IP:443 to the API server on loopback."""
        self._ip_forward = IP_FORWARD.read_text().strip()
        done = subprocess.run(
            ["ip", "addr", "add", f"{SERVICE_IP}/32", "dev", "lo", "scope", "host"],
            capture_output=True,
            text=True,
            check=False,
        )
        present = any(m in done.stderr for m in ("File exists", "already assigned"))
        if done.returncode != 0 and not present:
            raise NodeError(f"ip addr add {SERVICE_IP}: {done.stderr.strip()}")
        self._service_ip_added = done.returncode == 0
        port = int(self.plane.server.rsplit(":", 1)[1])
        self._relay = Relay((SERVICE_IP, 443), ("127.0.0.1", port))

    def _env(self) -> dict[str, str]:
        # containerd finds containerd-shim-runc-v2 on PATH.
        return {**os.environ, "PATH": f"{self.bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}"}

    def _binary(self, name: str) -> Path:
        return self.bin_dir / (f"{self.release}/{name}" if name in RELEASE_BINARIES else name)

    def _spawn(self, name: str, args: Sequence[str]) -> subprocess.Popen[bytes]:
        process = self.popen(name, args)
        self._processes.append((name, process))
        return process

    def popen(self, name: str, args: Sequence[str]) -> subprocess.Popen[bytes]:
        """Start one of the node's binaries, its output appended to logs/<name>.log."""
        with (self.log_dir / f"{name}.log").open("ab") as log:
            return subprocess.Popen(
                [str(self._binary(name)), *args],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.work_dir,
                env=self._env(),
                preexec_fn=_die_with_parent,
            )

    def _start_containerd(self) -> None:
        d = self._containerd_dir
        cni_conf = d / "cni" / "conf"
        cni_conf.mkdir(parents=True, exist_ok=True)
        conflist = {
            "cniVersion": "1.0.0",
            "name": "gpu2dra-e2e",
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": NODE_BRIDGE,
                    # The bridge plugin turns ip_forward on with these: restored at stop.
                    "isGateway": self.pod_network,
                    "isDefaultGateway": self.pod_network,
                    "ipMasq": False,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": POD_SUBNET}]],
                        "dataDir": str(d / "cni" / "ipam"),
                    },
                },
                {"type": "loopback"},
            ],
        }
        (cni_conf / "10-gpu2dra.conflist").write_text(json.dumps(conflist, indent=2))
        runtime = 'plugins."io.containerd.cri.v1.runtime"'
        config = f"""version = 3
root = "{d / "root"}"
state = "{d / "state"}"
[grpc]
  address = "{self._socket}"
[ttrpc]
  address = "{self._socket}.ttrpc"
[plugins."io.containerd.cri.v1.images".pinned_images]
  sandbox = "{PAUSE_IMAGE}"
[{runtime}]
  enable_cdi = true
  cdi_spec_dirs = ["{self.cdi_dir}"]
  # The VM lacks CAP_SYS_RESOURCE: without this every sandbox fails in runc's nsexec.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [{runtime}.containerd.runtimes.runc.options]
    SystemdCgroup = false
    BinaryName = "{RUNC}"
    Root = "{d / "runc"}"
  [{runtime}.cni]
    bin_dirs = ["{CNI_BIN_DIR}"]
    conf_dir = "{cni_conf}"
"""
        (d / "config.toml").write_text(config)
        self._spawn("containerd", ["--config", str(d / "config.toml")])
        self._wait(
            "containerd",
            lambda: self.ctr("version", check=False).returncode == 0,
            "containerd to answer on its socket",
        )

    def ctr(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """`ctr` on this node's containerd, in the CRI namespace."""
        done = subprocess.run(
            [
                str(self.bin_dir / "ctr"),
                "--address",
                str(self._socket),
                "--namespace",
                CONTAINERD_NAMESPACE,
                *args,
            ],
            capture_output=True,
            text=True,
            check=False,
            env=self._env(),
        )
        if check and done.returncode != 0:
            raise NodeError(f"ctr {' '.join(args)}: {done.stderr.strip()}")
        return done

    def _import_images(self) -> None:
        for image in IMAGES:
            # ctr imports the host platform's image only; build.sh builds for this machine.
            self.ctr("images", "import", str(self.bin_dir / "images" / f"{image}.tar"))

    def _start_kubelet(self) -> None:
        root = self.kubelet_root
        kubeconfig = self.work_dir / "kubelet.kubeconfig"
        self.plane.write_node_kubeconfig(kubeconfig)
        config = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "failCgroupV1": False,  # 1.35 refuses cgroup v1 hosts by default
            "cgroupDriver": "cgroupfs",
            "failSwapOn": False,
            "containerRuntimeEndpoint": f"unix://{self._socket}",
            "address": self.ip,
            "port": KUBELET_PORT,
            "readOnlyPort": 0,
            # Test only: the apiserver has no kubelet client certificate, so kubectl exec and
            # logs reach the kubelet anonymously.
            "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
            "authorization": {"mode": "AlwaysAllow"},
            "podLogsDir": str(self.pod_logs),
            "resolvConf": "/etc/resolv.conf",
            "clusterDomain": "cluster.local",
            "imageGCHighThresholdPercent": 100,
            "evictionHard": {},
            "registerNode": True,
            # A pod whose claim the kubelet may not read yet is started at the next resync:
            # the API server's Node authorizer learns the pod's claim from its own informer,
            # after the kubelet has seen the pod bound, and a failed PrepareDynamicResources
            # is not a sync error, so no 10 s back-off (default 1m).
            "syncFrequency": "10s",
        }
        config_file = self.work_dir / "kubelet.yaml"
        config_file.write_text(yaml.safe_dump(config, sort_keys=False))
        self._spawn(
            "kubelet",
            [
                f"--config={config_file}",
                f"--kubeconfig={kubeconfig}",
                f"--root-dir={root}",
                f"--cert-dir={root / 'pki'}",
                f"--hostname-override={self.name}",
                f"--node-ip={self.ip}",
                *self._node_labels(),
                "--v=2",
            ],
        )

    def _node_labels(self) -> list[str]:
        """With daemonsets, the label the GPU Operator gives a GPU node: its device plugin."""
        if not self._follow_labels:
            return []
        key, value = SELECTORS[DEVICE_PLUGIN]
        return [f"--node-labels={key}={value}"]

    def plugin_args(self, name: str) -> list[str]:
        """The arguments of DRA_PLUGIN or DEVICE_PLUGIN: both read the node's inventory."""
        inventory = self.work_dir / "devices.json"
        inventory.write_text(json.dumps(self.devices, indent=2))
        if name == DEVICE_PLUGIN:
            return [
                f"--devices={inventory}",
                f"--device-plugin-dir={DEVICE_PLUGIN_DIR}",
                "--v=4",
            ]
        return [
            # The node's identity, not the admin's: the Node authorizer lets it publish
            # this node's ResourceSlices and read the claims of the pods bound here.
            f"--kubeconfig={self.work_dir / 'kubelet.kubeconfig'}",
            f"--node-name={self.name}",
            f"--devices={inventory}",
            f"--cdi-dir={self.cdi_dir}",
            f"--registrar-dir={self.kubelet_root / 'plugins_registry'}",
            f"--plugin-dir={self.kubelet_root / 'plugins' / DRIVER}",
            *self._sharing_flags(),
            "--v=4",
        ]

    def whole_gpus(self) -> list[Obj]:
        """The inventory's whole GPUs: what the device plugin advertises."""
        return [d for d in self.devices if d["attributes"].get("type", {}).get("string") == "gpu"]

    def _sharing_flags(self) -> list[str]:
        return [f"--consumable-shares={self.consumable_shares}"] if self.consumable_shares else []

    def _wait_ready(self) -> None:
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        core = client.CoreV1Api(self.api)

        def ready() -> bool:
            try:
                node = core.read_node(self.name)
            except ApiException as error:
                if error.status == 404:
                    return False
                raise
            conditions = (node.status and node.status.conditions) or []
            return any(c.type == "Ready" and c.status == "True" for c in conditions)

        self._wait("kubelet", ready, f"node {self.name} to be Ready")
        # The TaintNodesByCondition admission plugin taints a new Node not-ready; the
        # node-lifecycle controller that would lift it is off in the e2e control plane.
        core.patch_node(self.name, {"spec": {"taints": None}})
        if self._follow_labels:
            gpus = str(len(self.whole_gpus()))

            def advertised() -> bool:
                allocatable = core.read_node(self.name).status.allocatable or {}
                return allocatable.get("nvidia.com/gpu") == gpus

            self._wait(DEVICE_PLUGIN, advertised, f"nvidia.com/gpu: {gpus} on {self.name}")
            return
        custom = client.CustomObjectsApi(self.api)

        def published() -> bool:
            slices = custom.list_cluster_custom_object(
                "resource.k8s.io",
                "v1",
                "resourceslices",
                field_selector=f"spec.nodeName={self.name},spec.driver={DRIVER}",
            )["items"]
            names = {d["name"] for s in slices for d in s["spec"].get("devices", [])}
            return names == {d["name"] for d in self.devices}

        self._wait(DRA_PLUGIN, published, f"the ResourceSlice of {self.name}")

    def _wait(self, name: str, probe: Callable[[], bool], what: str) -> None:
        """Poll probe until true; fail early when any of the node's processes exited."""
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            for process_name, process in self._processes:
                if process.poll() is not None:
                    raise NodeError(
                        f"{process_name} exited with {process.returncode} while waiting for "
                        f"{what}:\n{self.log_tail(process_name)}"
                    )
            if self.daemonsets is not None and self.daemonsets.failed:
                raise NodeError(f"the DaemonSets' stand-in failed: {self.daemonsets.failed}")
            with contextlib.suppress(Exception):
                if probe():
                    return
            time.sleep(0.25)
        raise NodeError(
            f"timed out after {self.start_timeout:.0f}s waiting for {what}:\n" + self.log_tail(name)
        )

    def log_tail(self, name: str, lines: int = 30) -> str:
        path = self.log_dir / f"{name}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return f"--- last lines of {path} ---\n" + "\n".join(text.splitlines()[-lines:])

    # -- what tests look at --------------------------------------------------------------------

    def cdi_specs(self) -> dict[str, Obj]:
        """The plugin's CDI specs by file name (one per prepared claim)."""
        return {p.name: json.loads(p.read_text()) for p in sorted(self.cdi_dir.glob("*.json"))}

    # -- stop ----------------------------------------------------------------------------------

    def stop(self, timeout: float = 10.0) -> None:
        """Stop everything this node started and remove what it left behind."""
        processes = dict(self._processes)
        if "kubelet" in processes and processes["kubelet"].poll() is None:
            self._delete_pods()
        if self.daemonsets is not None:
            self.daemonsets.close(timeout)
            self.daemonsets = None
        for name in (DRA_PLUGIN, "kubelet"):
            if name in processes:
                _terminate(processes[name], timeout)
        if "containerd" in processes and processes["containerd"].poll() is None:
            self._remove_containers()
        if "containerd" in processes:
            _terminate(processes["containerd"], timeout)
        self._processes = []
        self._kill_leftover_shims()
        self._unmount_all()
        self._remove_host_state()
        self._delete_node_object()
        self._stop_service_relay()

    def _stop_service_relay(self) -> None:
        if self._relay is not None:
            self._relay.close()
            self._relay = None
        if self._service_ip_added:
            subprocess.run(
                ["ip", "addr", "del", f"{SERVICE_IP}/32", "dev", "lo"],
                capture_output=True,
                check=False,
            )
            self._service_ip_added = False
        if self._ip_forward:
            IP_FORWARD.write_text(self._ip_forward + "\n")
            self._ip_forward = ""

    def _delete_pods(self) -> None:
        """Delete the pods bound here and give the kubelet time to stop their containers
        (and the plugin to unprepare their claims)."""
        from kubernetes import client

        core = client.CoreV1Api(self.api)
        with contextlib.suppress(Exception):
            pods = core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={self.name}")
            for pod in pods.items:
                with contextlib.suppress(Exception):
                    core.delete_namespaced_pod(
                        pod.metadata.name, pod.metadata.namespace, grace_period_seconds=0
                    )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            tasks = self.ctr("tasks", "list", "--quiet", check=False)
            if tasks.returncode != 0 or not tasks.stdout.strip():
                return
            time.sleep(0.5)

    def _remove_containers(self) -> None:
        tasks = self.ctr("tasks", "list", "--quiet", check=False).stdout.split()
        for task in tasks:
            self.ctr("tasks", "kill", "--signal", "SIGKILL", task, check=False)
        for task in tasks:
            self.ctr("tasks", "delete", "--force", task, check=False)
        for container in self.ctr("containers", "list", "--quiet", check=False).stdout.split():
            self.ctr("containers", "delete", container, check=False)

    def _kill_leftover_shims(self) -> None:
        """Shims detach from containerd; end those of this node's containerd, by PID."""
        shim = str(self.bin_dir / "containerd-shim-runc-v2")
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                exe = os.readlink(proc / "exe")
                cmdline = (proc / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if exe == shim and str(self._socket).encode() in cmdline:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(proc.name), signal.SIGKILL)

    def _unmount_all(self) -> None:
        """Unmount everything under work_dir, deepest first (the kubelet bind-mounts its root
        dir onto itself; containerd mounts rootfs overlays and network namespaces)."""
        prefix = str(self.work_dir)
        for _ in range(5):
            mounts = []
            for line in Path("/proc/self/mountinfo").read_text().splitlines():
                point = line.split()[4].encode().decode("unicode_escape")
                if point == prefix or point.startswith(prefix + "/"):
                    mounts.append(point)
            if not mounts:
                return
            for point in sorted(mounts, key=len, reverse=True):
                subprocess.run(["umount", "-l", point], capture_output=True, check=False)

    def _remove_host_state(self) -> None:
        _forget_device_plugins()
        for path in self._absent_at_start:
            shutil.rmtree(path, ignore_errors=True)
        if not self._bridge_existed:
            subprocess.run(["ip", "link", "delete", NODE_BRIDGE], capture_output=True, check=False)
        if not self._cgroups_existed:
            for top in _kubepods_cgroups():
                for directory in sorted(top.rglob("*"), key=lambda p: len(p.parts), reverse=True):
                    if directory.is_dir():
                        with contextlib.suppress(OSError):
                            directory.rmdir()
                with contextlib.suppress(OSError):
                    top.rmdir()

    def _delete_node_object(self) -> None:
        from kubernetes import client

        custom = client.CustomObjectsApi(self.api)
        with contextlib.suppress(Exception):
            slices = custom.list_cluster_custom_object(
                "resource.k8s.io",
                "v1",
                "resourceslices",
                field_selector=f"spec.nodeName={self.name},spec.driver={DRIVER}",
            )["items"]
            for item in slices:
                custom.delete_cluster_custom_object(
                    "resource.k8s.io", "v1", "resourceslices", item["metadata"]["name"]
                )
        with contextlib.suppress(Exception):
            client.CoreV1Api(self.api).delete_node(self.name)


class DaemonSets:
    """A stand-in for the NVIDIA device plugin's and the DRA driver's DaemonSets on one real
    node: each plugin runs while the node's labels match its node selector (SELECTORS), is
    started again when it exits (as its pod would be restarted), and gets SIGTERM when they no
    longer match (as the DaemonSet controller deletes a pod its node no longer selects).

    What a stopped plugin leaves is the kubelet's to clean up, as on a real node: the device
    plugin's GPUs turn unhealthy at once (allocatable nvidia.com/gpu 0; capacity follows five
    minutes later), and the DRA driver's ResourceSlices are deleted 30 s after it unregisters
    (its plugin does not delete them on its way out)."""

    def __init__(self, node: RealNode, *, poll: float = 0.5) -> None:
        self.node = node
        self.poll = poll
        self.running: dict[str, subprocess.Popen[bytes]] = {}
        self.events: list[str] = []  # "gpu-device-plugin started", ... in order
        self.failed: list[str] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="daemonsets", daemon=True)
        self._thread.start()

    def plugins(self) -> list[str]:
        """The plugins running now."""
        with self._lock:
            return sorted(n for n, p in self.running.items() if p.poll() is None)

    def read_labels(self) -> dict[str, str] | None:
        """The node's labels; None while they cannot be read (not registered yet, or the API
        server busy: the next round sees them)."""
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        try:
            node = client.CoreV1Api(self.node.api).read_node(self.node.name)
        except ApiException:
            return None
        return dict(node.metadata.labels or {})

    def _run(self) -> None:
        while not self._stop.is_set():
            labels: dict[str, str] | None = None
            try:
                labels = self.read_labels()
            except Exception as error:  # a stand-in that stops would hang the test
                self.failed.append(repr(error))
            if labels is not None:
                with self._lock:
                    if not self._stop.is_set():
                        self._follow(labels)
            self._stop.wait(self.poll)

    def _follow(self, labels: dict[str, str]) -> None:
        for name, (key, value) in SELECTORS.items():
            selected = labels.get(key) == value
            process = self.running.get(name)
            if selected and (process is None or process.poll() is not None):
                if process is not None:
                    self.events.append(f"{name} exited with {process.returncode}")
                self.running[name] = self.node.popen(name, self.node.plugin_args(name))
                self.events.append(f"{name} started")
            elif not selected and process is not None:
                _terminate(process, 10.0)
                del self.running[name]
                self.events.append(f"{name} stopped")

    def close(self, timeout: float) -> None:
        self._stop.set()
        self._thread.join(timeout)
        with self._lock:
            for process in self.running.values():
                _terminate(process, timeout)
            self.running.clear()


def _forget_device_plugins() -> None:
    """Remove the device manager's checkpoint: DEVICE_PLUGIN_DIR outlives a node when
    /var/lib/kubelet was there before it, and a kubelet that reads another node's checkpoint
    reports its resources (nvidia.com/gpu: 0) for five minutes."""
    with contextlib.suppress(OSError):
        (DEVICE_PLUGIN_DIR / "kubelet_internal_checkpoint").unlink()


def _kubepods_cgroups() -> list[Path]:
    """The kubelet's top cgroups (cgroupfs driver): one per v1 controller, or one on v2."""
    return [p for p in (*CGROUP_ROOT.glob("*/kubepods"), CGROUP_ROOT / "kubepods") if p.is_dir()]


def _terminate(process: subprocess.Popen[bytes], timeout: float) -> None:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
