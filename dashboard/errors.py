"""The domain's refusals."""


class Refused(Exception):
    """An edit refused: field → messages (each naming the field or the rule); `status` 400 or 409."""

    def __init__(self, errors: dict[str, list[str]], status: int = 400):
        super().__init__("; ".join(m for ms in errors.values() for m in ms))
        self.errors = errors
        self.status = status
