"""The supervisor's own errors: refusals a caller can act on, each naming what to do."""

from __future__ import annotations

from .._errors import Error


class SupervisorError(Error):
    """The supervisor refused a request (its limit is reached, it is closed, a name is taken, ...).

    Bad arguments raise TypeError or ValueError as everywhere in proctree;
    this is for requests that are well formed but cannot be honoured now.
    """

    def __init__(self, msg: str | None = None, name: str | None = None) -> None:
        super().__init__(None, name, msg)

    def __reduce__(self):
        return (type(self), (self.msg, self.name))

    def _default_msg(self):
        return "supervisor error"


class UnknownServiceError(SupervisorError, LookupError):
    """No service has that name, or no service was ever given that id."""

    def _default_msg(self):
        return "unknown service"
