"""What-if: bruteforce and TOPSIS side by side now, and other settings replayed over the stored history."""

import pytest

from dashboard.models import GuestSample, WhatIf
from dashboard.tasks import collect, run_whatif

pytestmark = pytest.mark.django_db


def collected_history(cluster, count):
    for _ in range(count):
        collect.apply(args=[cluster.pk])
    cluster.refresh_from_db()
    return cluster


def test_both_methods_side_by_side_on_the_latest_snapshot(client, collected, viewer):
    client.force_login(viewer)
    answer = client.get(f"/api/v1/clusters/{collected.pk}/methods/").json()
    brute, topsis = answer["bruteforce"], answer["topsis"]
    assert brute["guests"] and topsis["guests"]  # the simulator starts crowded: both move something
    # Bruteforce picks the lowest imbalance after; TOPSIS cannot do better on that score.
    assert brute["imbalance_after"] <= topsis["imbalance_after"] + 1e-12
    assert brute["imbalance_after"] < answer["imbalance"]
    assert answer["same"] == ((brute["guests"], brute["target"]) == (topsis["guests"], topsis["target"]))
    assert answer["why"]

    page = client.get(f"/clusters/{collected.pk}/whatif").content.decode()
    assert f"{brute['source']} → {brute['target']}" in page and answer["why"].split(" (")[0] in page
    assert "Only an operator or an admin may run a replay" in page  # a viewer sees, does not run


def test_a_replay_over_the_stored_history_runs_in_the_background_with_progress(
    client, cluster, operator, django_capture_on_commit_callbacks
):
    collected_history(cluster, 12)
    assert GuestSample.objects.filter(cluster=cluster).values("at").distinct().count() == 12
    client.force_login(operator)
    with django_capture_on_commit_callbacks(execute=True):  # queued on the in-memory broker: nobody runs it
        started = client.post(
            f"/api/v1/clusters/{cluster.pk}/whatif/",
            {"threshold": 0.02, "hold_duration": 0, "margin": 0.0, "period": "3h"},
            content_type="application/json",
        )
    assert started.status_code == 202, started.content
    pk = started.json()["id"]
    assert started.json()["state"] == "queued" and started.json()["changes"]["threshold"] == 0.02

    run_whatif.apply(args=[pk])  # as the worker runs it

    done = client.get(f"/api/v1/whatifs/{pk}/").json()
    assert done["state"] == "done" and done["progress"] == 1.0, done
    result = done["result"]
    assert result["rounds"] == 12
    # A near-zero threshold with no hold moves at least as often as the default 30 % after 3 rounds.
    assert result["proposed"]["moves"] >= result["current"]["moves"]
    assert result["proposed"]["moves"] > 0
    assert 0 <= result["proposed"]["p90_imbalance"] <= 1
    assert result["recorded"]["moves"] == 0  # nothing was migrated for real
    listed = client.get(f"/api/v1/whatifs/?cluster={cluster.pk}").json()["results"]
    assert [w["id"] for w in listed] == [pk]

    run_whatif.apply(args=[pk])  # delivered twice: the finished one stays as it is
    assert WhatIf.objects.get(pk=pk).result == result


def test_a_replay_without_history_fails_and_says_why(client, collected, operator):
    client.force_login(operator)
    pk = client.post(
        f"/api/v1/clusters/{collected.pk}/whatif/", {"period": "24h"}, content_type="application/json"
    ).json()["id"]
    run_whatif.apply(args=[pk])
    failed = client.get(f"/api/v1/whatifs/{pk}/").json()
    assert failed["state"] == "failed" and "at least two samples" in failed["error"]


def test_bad_what_if_input_is_refused_naming_the_field(client, collected, operator, viewer):
    client.force_login(operator)
    url = f"/api/v1/clusters/{collected.pk}/whatif/"
    bad = client.post(url, {"threshold": 2, "method": "magic"}, content_type="application/json")
    assert bad.status_code == 400
    errors = bad.json()
    assert errors["threshold"] == ["threshold must be at most 1"]
    assert errors["method"] == ["method must be one of: bruteforce, topsis"]
    assert errors["period"] == ["period is required"]
    assert not WhatIf.objects.exists()
    client.force_login(viewer)
    assert client.post(url, {"period": "3h"}, content_type="application/json").status_code == 403
