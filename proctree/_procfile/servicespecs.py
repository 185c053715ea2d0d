"""The plan's instances as the supervisor's ServiceSpecs: what `proctree up` hands to proctree.Supervisor.

Pure: a plan in, specs out. A setting the library refuses raises the
library's own TypeError / ValueError, its message led by where the setting
was written (the settings file and the entry).
"""

from __future__ import annotations

from typing import Any

from .._supervisor.spec import ServiceSpec
from .config import ProcfilePlan


def service_specs(plan: ProcfilePlan, stop_signal: int | None = None) -> list[ServiceSpec]:
    """One ServiceSpec per planned instance, in plan order.

    stop_signal: up's --stop-signal, for the entries without a stop_signal setting of their own.
    """
    specs = []
    for s in plan.services:
        try:
            extra: dict[str, Any] = {} if s.max_restarts is None else {"max_restarts": s.max_restarts}
            sig = s.stop_signal if s.stop_signal is not None else stop_signal
            if sig is not None:
                extra["stop_signal"] = sig
            specs.append(
                ServiceSpec(
                    s.command,
                    name=s.name,
                    cwd=s.cwd,
                    env=dict(s.env),
                    port=s.port,
                    ready=s.ready,
                    depends_on=dict(s.depends_on) or None,
                    restart=s.restart,
                    **extra,
                )
            )
        except (TypeError, ValueError) as exc:
            where = f"{plan.settings_file}: services.{s.entry}" if plan.settings_file else s.entry
            raise type(exc)(f"{where}: {exc}") from None
    return specs
