"""gpu2dra_pod_gpu_info at scrape: the rows of the exporter's three caches joined
(gpuinfo.py), written in Prometheus' text format from a line kept per row."""

from __future__ import annotations

from collections.abc import Collection, Iterator

from prometheus_client.core import GaugeMetricFamily, Metric

from app.exporter.gpuinfo import (
    LABELS,
    ClaimDevices,
    Identity,
    PodGpus,
    Row,
    SliceDevices,
    device_index,
    rows,
)
from app.watch.stores import Store

INFO = "gpu2dra_pod_gpu_info"


class PodGpuInfo:
    """The collector: the rows of the three caches, joined at scrape. The device index is
    rebuilt only after a ResourceSlice changed."""

    def __init__(
        self,
        pods: Store[tuple[str, str], PodGpus | None],
        claims: Store[tuple[str, str], ClaimDevices],
        slices: Store[str, SliceDevices],
        drivers: Collection[str],
    ) -> None:
        self.pods, self.claims, self.slices, self.drivers = pods, claims, slices, drivers
        self._index: dict[tuple[str, str, str], Identity] = {}
        self._stale = True
        self._lines: dict[Row, bytes] = {}

    def slices_changed(self) -> None:
        self._stale = True

    def devices(self) -> dict[tuple[str, str, str], Identity]:
        if self._stale:
            self._stale = False  # before the read: a change during it marks it stale again
            # tuple() of a dict's values runs without giving up the GIL: the watch thread
            # cannot change the dict half-way.
            self._index = device_index(tuple(self.slices.items.values()))
        return self._index

    def rows(self) -> list[Row]:
        pods = (p for p in tuple(self.pods.items.values()) if p is not None)
        claims = dict(self.claims.items)  # a copy made holding the GIL, as tuple() above
        return rows(pods, claims, self.devices(), self.drivers)

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(INFO, HELP, labels=LABELS)
        for row in self.rows():
            family.add_metric(row, 1)
        yield family

    def render(self) -> bytes:
        """The family in Prometheus' text format, as generate_latest writes it, from a line
        kept per row between scrapes: rows rarely change, and prometheus_client's writer
        costs five times the join for 10,000 series."""
        known, lines = self._lines, {}
        for row in self.rows():
            lines[row] = known.get(row) or _line(row)
        self._lines = lines  # rows gone are forgotten
        return _HEADER + b"".join(lines.values())


HELP = (
    "A device a container of a pod holds through a DRA claim (1); UUID is the physical GPU's, "
    "as dcgm-exporter labels it."
)
_HEADER = f"# HELP {INFO} {HELP}\n# TYPE {INFO} gauge\n".encode()
# Labels in name order, as prometheus_client writes them.
_ORDER = tuple(sorted(range(len(LABELS)), key=LABELS.__getitem__))
_NAMES = tuple(f'{LABELS[i]}="' for i in _ORDER)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _line(row: Row) -> bytes:
    labels = ",".join(f'{name}{_escape(row[i])}"' for name, i in zip(_NAMES, _ORDER, strict=True))
    return f"{INFO}{{{labels}}} 1.0\n".encode()
