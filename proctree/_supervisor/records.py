"""The services one supervisor remembers: by id (never reused) and by name, and what is left of forgotten ones.

Ids are handed out in order (s1, s2, ...) and never reused, so a stale id can
only be a no-op; the oldest finished services are forgotten beyond
max_records, never a live one nor one a live service depends on. Of a
forgotten service only its last row's seq is kept (a bounded number of them),
so that read() can still count what a pager never saw. No processes, no I/O.
"""

from __future__ import annotations

import collections
import re
from typing import TYPE_CHECKING

from .._errors import UnknownServiceError
from .logring import LogPage

if TYPE_CHECKING:
    from .service import Service

_ID = re.compile(r"s([0-9]+)")
_FORGOTTEN_SEQS = 65536  # forgotten services whose last row seq read() still knows


class Records:
    """Services by id (insertion order: oldest first) and by name (the newest of each name)."""

    def __init__(self, max_records: int) -> None:
        self.max_records = max_records
        self.by_id: dict[str, Service] = {}
        self.by_name: dict[str, Service] = {}
        # A forgotten service's last row seq, so that read() can count what a pager never saw (bounded).
        self._forgotten: collections.OrderedDict[str, int] = collections.OrderedDict()
        self._next_id = 1

    def new_id(self) -> str:
        sid = f"s{self._next_id}"
        self._next_id += 1
        return sid

    def add(self, service: Service) -> None:
        self.by_id[service.id] = service
        self.by_name[service.name] = service

    def forget_finished(self, room: int) -> None:
        """Forget the oldest finished services so that room more fit under max_records; never a live one."""
        excess = len(self.by_id) + room - self.max_records
        if excess <= 0:
            return
        for sid, service in list(self.by_id.items()):
            if excess <= 0:
                break
            if service.live or (service.task is not None and not service.task.done()):
                continue
            if any(dep is service for other in self.by_id.values() if other.live for dep, _ in other.needs):
                continue  # a live service still reads its dependency's record
            del self.by_id[sid]
            self._forgotten[sid] = service.ring.last_seq
            while len(self._forgotten) > _FORGOTTEN_SEQS:
                self._forgotten.popitem(last=False)
            if self.by_name.get(service.name) is service:
                del self.by_name[service.name]
            excess -= 1

    def find(self, id_or_name: object) -> Service | None:
        """The service an id or name means; None for an id that was handed out and since forgotten."""
        if not isinstance(id_or_name, str):
            raise TypeError(f"a service is named by its id or name (a str), not {type(id_or_name).__name__}")
        service = self.by_id.get(id_or_name)
        if service is not None:
            return service
        match = _ID.fullmatch(id_or_name)
        if match is not None:
            if int(match.group(1)) < self._next_id and int(match.group(1)) > 0:
                return None  # a stale id: never reused, so it can only be a no-op
            raise UnknownServiceError(f"no service was ever given the id {id_or_name!r}", id_or_name)
        service = self.by_name.get(id_or_name)
        if service is None:
            known = ", ".join(sorted(self.by_name)) or "none"
            raise UnknownServiceError(f"no service is named {id_or_name!r} (names: {known})", id_or_name)
        return service

    def forgotten_page(self, sid: str, since: int | None, limit: int | None) -> LogPage:
        """read() of a forgotten id: no rows, and every row after since counted in dropped (next: its last seq)."""
        if since is not None and (isinstance(since, bool) or not isinstance(since, int) or since < 0):
            raise ValueError(f"since must be an int >= 0 or None, got {since!r}")
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise ValueError(f"limit must be an int >= 1 or None, got {limit!r}")
        last = self._forgotten.get(sid)
        if last is None:  # forgotten too long ago to know: nothing can be said but "no rows"
            return LogPage((), since or 0, 0)
        since = since or 0
        if since > last:
            raise ValueError(f"since={since} is past {sid}'s last row ({last}); it was forgotten")
        return LogPage((), last, last - since)
