"""Partitionable devices (KEP-4815) on plain dict slices: two MIG placements that share a
memory slice of one counter set; with one allocated, the other is not free."""

from __future__ import annotations

from app.readers.cel.devices import devices_of
from app.readers.counters import short, spent
from app.readers.demand import Shape
from app.readers.supply import devices_by_class, pools
from tests.support.counters import CLASS, DRIVER, claim, mig_slices


def test_devices_carry_what_they_consume_and_their_pools_counter_sets() -> None:
    devices = devices_of(mig_slices())
    assert [d.name for d in devices] == ["gpu-0-mig-1g-0", "gpu-0-mig-1g-1", "gpu-0-mig-2g-0"]
    assert set(devices[2].counter_sets["gpu-0-counter-set"]) == {"memory-slice-0", "memory-slice-1"}
    assert devices[2].consumes[0]["counterSet"] == "gpu-0-counter-set"


def test_an_allocated_placement_spends_the_counters_of_one_that_overlaps_it() -> None:
    one, other, two = devices_of(mig_slices())
    counters = spent([one, other, two], {one.key})
    assert short(two, counters) == ((DRIVER, "node-a", "gpu-0-counter-set", "memory-slice-0"),)
    assert short(other, counters) == ()
    assert short(one, counters) == (), "an allocated device's counters are spent on itself"
    assert counters.by[DRIVER, "node-a", "gpu-0-counter-set", "memory-slice-0"] == (one.key,)


def test_counters_are_per_pool() -> None:
    devices = devices_of([*mig_slices("node-a"), *mig_slices("node-b")])
    taken = spent(devices, {(DRIVER, "node-a", "gpu-0-mig-1g-0")})
    free = [d.ref for d in devices if not short(d, taken)]
    assert f"{DRIVER}/node-a/gpu-0-mig-2g-0" not in free
    assert f"{DRIVER}/node-b/gpu-0-mig-2g-0" in free


def test_capacity_counts_a_placement_whose_counters_are_spent_as_not_free() -> None:
    devices = devices_by_class(devices_of(mig_slices()), [CLASS], [claim("gpu-0-mig-1g-0")])
    whole = Shape("mig.nvidia.com", (f"device.attributes['{DRIVER}'].profile == '2g'",))
    assert devices.free_for(whole) == 0
    assert devices.free_for(Shape("mig.nvidia.com")) == 1  # gpu-0-mig-1g-1
    free = {row.profile: row.free for row in pools(devices, ["mig.nvidia.com"])}
    assert free == {"1g": 1, "2g": 0}


def test_nothing_allocated_leaves_every_placement_free() -> None:
    devices = devices_by_class(devices_of(mig_slices()), [CLASS], [])
    assert devices.free_for(Shape("mig.nvidia.com")) == 3
