"""Seal every stored token secret with the first of CRS_FERNET_KEYS: the step of a key rotation
after which the old keys can be dropped (docs/security.md)."""

from cryptography.fernet import Fernet
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from dashboard import crypt
from dashboard.models import Cluster


class Command(BaseCommand):
    help = "Re-encrypt the stored token secrets with the first key of CRS_FERNET_KEYS (or print a new key)."

    def add_arguments(self, parser):
        parser.add_argument("--new-key", action="store_true", help="only print a new Fernet key, to put first")

    def handle(self, *args, new_key: bool, **options):
        if new_key:
            self.stdout.write(Fernet.generate_key().decode())
            return
        count = 0
        with transaction.atomic():
            for cluster in Cluster.objects.select_for_update().exclude(token_secret="").only("token_secret"):
                try:
                    cluster.token_secret = crypt.reencrypt(cluster.token_secret)
                except crypt.Undecryptable as exc:
                    raise CommandError(f"cluster {cluster.pk}: {exc}") from None
                cluster.save(update_fields=["token_secret"])
                count += 1
        self.stdout.write(f"{count} token secret(s) encrypted with the first key")
