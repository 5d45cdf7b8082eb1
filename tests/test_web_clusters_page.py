"""The clusters page (admins only), linked from every page's header for them."""

import pytest
from django.urls import reverse

from dashboard.models import Cluster

pytestmark = pytest.mark.django_db


def test_the_clusters_page_is_for_admins_and_linked_for_them_only(client, admin, operator, cluster):
    client.force_login(operator)
    assert client.get(reverse("dashboard:clusters")).status_code == 403
    assert 'id="clusters-link"' not in client.get("/").content.decode()
    client.force_login(admin)
    home = client.get("/").content.decode()
    assert f'href="{reverse("dashboard:clusters")}" id="clusters-link"' in home
    page = client.get(reverse("dashboard:clusters"))
    assert page.status_code == 200 and 'data-cluster="test"' in page.content.decode()


def test_editing_shows_the_connection_but_never_the_secret(admin_client, pve):
    config = {"host": "127.0.0.1", "port": pve.port, "token": "root@pam!crs=the-secret-value", "verify_ssl": False}
    cluster = Cluster.objects.create(name="pve", source_kind="proxmox", source_config=config)
    page = admin_client.get(reverse("dashboard:cluster-edit", args=[cluster.pk])).content.decode()
    assert 'value="root@pam!crs"' in page and '<option value="insecure" selected>' in page
    assert "A secret is stored (encrypted, never shown)" in page and "the-secret-value" not in page


def test_the_add_cluster_form_names_the_guides_proxmox_page_not_the_products_api_docs(admin_client):
    """Issue 38 items 4 and 5: the token's role is Proxmox's, told by the operator's guide."""
    page = admin_client.get(reverse("dashboard:clusters")).content.decode()
    told = page[page.index('id="token-guide"') : page.index("</p>", page.index('id="token-guide"'))]
    assert "/api/docs/" not in told and "docs/proxmox.md" in told and "pveum" in told
    assert "<code>crs@pve!crs=secret</code>) may be pasted here" in page
