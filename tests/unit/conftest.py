from __future__ import annotations

import pytest

from app.core.catalog import Catalog
from app.core.policy import Policy, load_policy


@pytest.fixture
def policy() -> Policy:
    return load_policy(None)


@pytest.fixture
def catalog(policy: Policy) -> Catalog:
    return Catalog.of(policy.device_classes)
