"""The fault soak (harness/faultsoak.py) as a test: ten minutes of a fault a minute under the
distributed stack, nothing lost, doubled or stuck; the table it prints names what failed.
MINUTES in the environment sets another length (e.g. MINUTES=3 while developing)."""

import os

import pytest
from conftest import service_or_skip

from harness.faultsoak import database_url_of, soak, table


@pytest.mark.soak
@pytest.mark.faultsoak
def test_a_fault_every_minute_loses_doubles_and_strands_nothing():
    server = service_or_skip("CRS_TEST_DATABASE_URL")
    report = soak(database_url_of(server), float(os.environ.get("MINUTES", "10")))
    failed = [f"{name}: {measured}" for name, measured, ok in report["checks"] if not ok]
    assert not failed, "\n".join(["the fault soak failed (tests/artifacts/faultsoak-*):", *failed, "", table(report)])
