"""tls.mode=helm: the CA and certificate live `tls.validityDays` (a year), and the Secret says
when an upgrade renews them (`gpu2dra.io/renew-after`, `tls.renewBeforeDays` before they
expire). The renewal itself needs lookup, so an API server: tests/e2e/test_helm_tls.py."""

from __future__ import annotations

import base64
import time
from datetime import timedelta
from pathlib import Path

import pytest
from cryptography import x509

from tests.support.webhook import of_kind, render_chart

DAY = 86400


def lifetime(pem: str) -> timedelta:
    cert = x509.load_pem_x509_certificate(base64.b64decode(pem))
    return cert.not_valid_after_utc - cert.not_valid_before_utc


def test_a_year_by_default_renewed_by_an_upgrade_in_its_last_half(helm: Path) -> None:
    before = int(time.time())
    secret = of_kind(render_chart(helm), "Secret")
    for key in ("ca.crt", "tls.crt"):
        assert timedelta(days=364) < lifetime(secret["data"][key]) <= timedelta(days=366)
    renew_after = int(secret["metadata"]["annotations"]["gpu2dra.io/renew-after"])
    assert before + (365 - 180) * DAY - 60 <= renew_after <= time.time() + (365 - 180) * DAY


@pytest.mark.parametrize(("validity", "before", "after_days"), [(30, 10, 20), (90, 90, 0)])
def test_the_renewal_follows_the_values(
    helm: Path, validity: int, before: int, after_days: int
) -> None:
    sets = (f"tls.validityDays={validity}", f"tls.renewBeforeDays={before}")
    secret = of_kind(render_chart(helm, *sets), "Secret")
    assert lifetime(secret["data"]["tls.crt"]).days in (validity - 1, validity)
    renew_after = int(secret["metadata"]["annotations"]["gpu2dra.io/renew-after"])
    assert abs(renew_after - (time.time() + after_days * DAY)) < 120
