"""The API's cluster forms: a cluster as created and changed (name, source, a Proxmox
connection with its write-only token secret), and the Test connection report."""

import os

from drf_spectacular.utils import extend_schema_field, inline_serializer
from rest_framework import serializers

import crs.sources
from crs.sources import proxmox, proxmox_check, tls

from .. import connections, crypt
from ..models import Cluster

KINDS = ("simulator", "proxmox")  # a snapshot comes in through the import page


def _choice(name: str, values, **kwargs) -> serializers.ChoiceField:
    allowed = ", ".join(values)
    return serializers.ChoiceField(
        choices=list(values), error_messages={"invalid_choice": f"{name} must be one of: {allowed}"}, **kwargs
    )


class _Strict:
    """Text only: DRF's CharField would take 0 for "0"."""

    def to_internal_value(self, data):
        if not isinstance(data, str):
            raise serializers.ValidationError(f"{self.field_name} must be text")  # type: ignore[attr-defined]
        return super().to_internal_value(data)  # type: ignore[misc]


class Text(_Strict, serializers.CharField):
    pass


class TextMatching(_Strict, serializers.RegexField):
    pass


class ConnectionSerializer(serializers.Serializer):
    """A Proxmox VE connection: where, which token, how its certificate is trusted."""

    host = TextMatching(
        r"^[A-Za-z0-9]([A-Za-z0-9.:-]{0,252})$",
        help_text="A node's host name or IP address.",
        error_messages={"invalid": "host must be a host name or an IP address, e.g. pve1.example.net"},
    )
    port = serializers.IntegerField(
        min_value=1,
        max_value=65535,
        default=8006,
        error_messages={"min_value": "port must be 1..65535", "max_value": "port must be 1..65535"},
    )
    token_id = TextMatching(
        proxmox.TOKEN_ID,
        help_text="USER@REALM!TOKENID, as Proxmox shows the token, e.g. crs@pve!crs; or the whole token, "
        "USER@REALM!TOKENID=SECRET, split into token_id and token_secret.",
        error_messages={
            "invalid": "token_id must be the user, realm and token name, user@realm!name (e.g. crs@pve!crs), "
            "or the whole token, user@realm!name=secret"
        },
    )
    token_secret = Text(
        write_only=True,
        trim_whitespace=True,
        style={"input_type": "password"},
        help_text="The token's secret (a UUID): stored encrypted, never shown again.",
    )
    token_secret_set = serializers.BooleanField(read_only=True, help_text="Whether a token secret is stored.")
    tls = _choice(
        "tls",
        tls.MODES,
        default="system",
        help_text="How the certificate is trusted: the system's CAs, a CA bundle (ca_bundle), a pinned "
        "SHA-256 fingerprint (fingerprint), or insecure: not verified at all (chosen explicitly).",
    )
    ca_bundle = Text(required=False, allow_blank=True, default="", help_text="A file on the server.")
    fingerprint = Text(
        required=False, allow_blank=True, default="", help_text="SHA-256 of the certificate, colons optional."
    )

    def to_internal_value(self, data):
        """The whole token, as the README and `pveum` write it (user@realm!name=secret), may come
        in token_id: split into the ID and the secret, so a pasted token is not refused."""
        token = data.get("token_id") if isinstance(data, dict) else None
        if isinstance(token, str) and "=" in token:
            token_id, _, secret = token.strip().partition("=")
            given = data.get("token_secret")
            if isinstance(given, str) and given.strip() and given.strip() != secret:
                raise serializers.ValidationError(
                    {"token_secret": "differs from the secret in the whole token given in token_id: give one"}
                )
            data = {**data, "token_id": token_id, "token_secret": secret}
        return super().to_internal_value(data)

    def validate_fingerprint(self, value: str) -> str:
        try:
            return tls.pinned(value) if value.strip() else ""
        except crs.sources.ConfigError as exc:
            raise serializers.ValidationError(str(exc)) from None

    def validate(self, attrs):
        mode = attrs.get("tls", "system")
        if mode == "fingerprint" and not attrs.get("fingerprint"):
            raise serializers.ValidationError({"fingerprint": "tls fingerprint needs the certificate's fingerprint"})
        if mode == "ca-bundle" and not os.path.isfile(attrs.get("ca_bundle", "")):
            raise serializers.ValidationError({"ca_bundle": "tls ca-bundle needs the path of a CA file on the server"})
        return attrs


class ClusterSerializer(serializers.ModelSerializer):
    read_only = serializers.BooleanField(help_text="An imported snapshot: nothing is ever migrated.")  # type: ignore[assignment]

    class Meta:
        model = Cluster
        fields = [
            "id",
            "name",
            "source_kind",
            "archived",
            "read_only",
            "collected_at",
            "source_error",
            "source_error_at",
            "hold_count",
            "last_round_at",
        ]


class ClusterDetailSerializer(ClusterSerializer):
    proxmox = serializers.SerializerMethodField(help_text="A Proxmox cluster's connection; null for other sources.")

    class Meta(ClusterSerializer.Meta):
        fields = [*ClusterSerializer.Meta.fields, "proxmox"]

    @extend_schema_field(ConnectionSerializer(allow_null=True))
    def get_proxmox(self, cluster: Cluster) -> dict | None:
        return connections.connection(cluster)


class ClusterWriteSerializer(serializers.ModelSerializer):
    """A cluster as created (POST) or changed (PATCH). A Proxmox cluster's connection goes in
    `proxmox`; `source_config` holds the adapter's further options (for Proxmox: guests,
    cluster, timeout_s, usage_period). Each is checked as the adapter will read it."""

    source_kind = _choice("source_kind", KINDS)
    source_config = serializers.JSONField(required=False, help_text="The source adapter's further options.")
    proxmox = ConnectionSerializer(required=False)

    class Meta:
        model = Cluster
        fields = ["name", "source_kind", "source_config", "proxmox"]

    def validate(self, attrs):
        cluster = self.instance
        kind = attrs.get("source_kind", cluster.source_kind if cluster else "simulator")
        options = attrs.get("source_config", cluster.source_config if cluster and cluster.source_kind == kind else {})
        if not isinstance(options, dict):
            raise serializers.ValidationError({"source_config": "source_config must be a JSON object"})
        given = attrs.pop("proxmox", None)
        if kind != "proxmox":
            if given is not None:
                raise serializers.ValidationError({"proxmox": "only a proxmox cluster has a connection"})
            config, secret = options, None
        else:
            config, secret = self._proxmox(cluster, given, options)
        try:
            with_secret = config | ({"token_value": secret} if secret else {})
            crs.sources.open_source(kind, with_secret)
        except crs.sources.ConfigError as exc:
            raise serializers.ValidationError({"proxmox" if kind == "proxmox" else "source_config": str(exc)}) from None
        attrs |= {"source_kind": kind, "source_config": config}
        if kind == "proxmox" and given and given.get("token_secret"):
            attrs["token_secret"] = crypt.encrypt(secret or "")
        elif kind != "proxmox":
            attrs["token_secret"] = ""
        return attrs

    def _proxmox(self, cluster: Cluster | None, given: dict | None, options: dict) -> tuple[dict, str | None]:
        """The connector's config and the token secret (the stored one unless a new one is given)."""
        mixed = sorted((set(options) & connections.CONNECTION_KEYS) | {"token", "token_value"} & set(options))
        if mixed and "source_config" in self.initial_data:
            raise serializers.ValidationError(
                {"source_config": f"{', '.join(mixed)}: part of the connection; give it in proxmox"}
            )
        stored = connections.connection(cluster) if cluster else None
        if given is None and stored is None:
            raise serializers.ValidationError({"proxmox": "a proxmox cluster needs its connection"})
        data = {**(stored or {}), **(given or {})}
        missing = [k for k in ("host", "token_id") if not data.get(k)]
        if missing:
            raise serializers.ValidationError({"proxmox": {k: "this field is required" for k in missing}})
        secret = (given or {}).get("token_secret") or stored_secret(cluster)
        if not secret:
            raise serializers.ValidationError({"proxmox": {"token_secret": "this field is required"}})
        return connections.source_config(data, options), secret


def stored_secret(cluster: Cluster | None) -> str:
    """The cluster's token secret decrypted ("" when none is stored), or a 400 saying the key is gone."""
    try:
        return crypt.decrypt(cluster.token_secret) if cluster and cluster.token_secret else ""
    except crypt.Undecryptable as exc:
        raise serializers.ValidationError({"token_secret": str(exc)}) from None


REPORT = inline_serializer(
    "ConnectionReport",
    {
        "ok": serializers.BooleanField(help_text="Every finding is fine."),
        "host": serializers.CharField(),
        "port": serializers.IntegerField(),
        "fingerprint": serializers.CharField(
            allow_null=True, help_text="SHA-256 of the certificate the server presented (null: no handshake)."
        ),
        "findings": inline_serializer(
            "Finding",
            {
                "topic": serializers.ChoiceField(
                    choices=["reach", "tls", "token", "version", "privileges", "cluster", "ha", "crs"]
                ),
                "ok": serializers.BooleanField(),
                "text": serializers.CharField(),
                "details": serializers.DictField(),
            },
            many=True,
        ),
    },
)


def check(data: dict, secret: str, options: dict | None = None) -> dict:
    """`crs check proxmox`'s report for a connection as the form gives it."""
    config = connections.source_config(data, options or {}) | {"token_value": secret}
    return proxmox_check.check(proxmox_check.target(proxmox.parse_config(config))).to_dict()
