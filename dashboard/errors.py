"""The domain's refusals, one tree: what a person asked cannot be done, said in their words.

`Refused` — the state does not allow it now (409): a maintenance on an archived cluster, a
rolling maintenance already under way, a node not empty yet. `BadInput` — the request names
a value the domain does not take (400). Either carries one reason, or field → messages, each
naming the field. The API answers them in one place (api.base.exception_handler); a page
shows the form that asked again, each reason beside its field, with the refusal's status.
"""


class Refused(Exception):
    status = 409

    def __init__(self, reason: str | dict[str, list[str]]):
        self.errors = reason if isinstance(reason, dict) else {}
        super().__init__(reason if isinstance(reason, str) else "; ".join(m for ms in reason.values() for m in ms))

    def body(self) -> dict:
        """As the API answers it: field → messages, or {"detail": the reason}."""
        return self.errors or {"detail": str(self)}


class BadInput(Refused):
    status = 400

    def __init__(self, reason: str | dict[str, list[str]], field: str | None = None):
        super().__init__({field: [reason]} if field and isinstance(reason, str) else reason)
