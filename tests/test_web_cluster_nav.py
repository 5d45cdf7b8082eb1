"""Every page has the same top navigation (templatetags/nav.py), the page shown marked current."""

import re

import pytest
from django.urls import reverse

PAGES = {"guests": "guests", "rules": "HA rules", "rolling": "rolling maintenance", "capacity": "capacity and power"}
EVERYWHERE = {"audit": "audit trail", "clusters": "clusters", "tokens": "API tokens"}


@pytest.mark.django_db
def test_each_cluster_page_links_to_every_other_and_marks_itself(admin_client, collected):
    for shown in PAGES:
        html = admin_client.get(reverse(f"dashboard:{shown}", args=[collected.pk])).content.decode()
        nav = re.search(r'<nav aria-label="cluster pages"[^>]*>(.*?)</nav>', html, re.S).group(1)
        links = dict(re.findall(r'<a href="([^"]+)"[^>]*>([^<]+)</a>', nav))
        assert links[reverse("dashboard:cluster", args=[collected.pk])] == collected.name
        for name, label in PAGES.items():
            assert links[reverse(f"dashboard:{name}", args=[collected.pk])] == label, (shown, name)
        assert re.findall(r'aria-current="page">([^<]+)</a>', nav) == [PAGES[shown]], shown


@pytest.mark.django_db
def test_the_audit_trail_clusters_and_tokens_pages_carry_the_same_navigation(admin_client, collected):
    cluster_pages = [reverse(f"dashboard:{name}", args=[collected.pk]) for name in ["cluster", *PAGES]]
    for shown, label in EVERYWHERE.items():
        html = admin_client.get(reverse(f"dashboard:{shown}")).content.decode()
        nav = re.search(r'<nav aria-label="cluster pages"[^>]*>(.*?)</nav>', html, re.S).group(1)
        links = re.findall(r'<a href="([^"]+)"[^>]*>([^<]+)</a>', nav)
        assert [href for href, _ in links[:5]] == cluster_pages, shown
        assert [text for _, text in links[5:]] == ["audit trail", "clusters", "API tokens", "API docs"], shown
        assert re.findall(r'aria-current="page">([^<]+)</a>', nav) == [label], shown
