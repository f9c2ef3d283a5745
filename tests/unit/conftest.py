from __future__ import annotations

import pytest

from app.catalog import Catalog
from app.policy import Policy, load_policy


@pytest.fixture
def policy() -> Policy:
    return load_policy(None)


@pytest.fixture
def catalog(policy: Policy) -> Catalog:
    return Catalog.of(policy.device_classes)
