"""proctree.Popen.__init__ with subprocess.Popen's exact parameters, plus proctree's keywords, made without inspect.

help(), inspect.signature and IDEs must show the running interpreter's Popen
parameters (they differ between Python versions) and keep_orphans= and
detach=. Setting __signature__ would need inspect, which costs milliseconds
of import with the name proctree.Popen; a function compiled once with those
very parameters shows them natively, and costs one small compile.

This module must never import anything: it loads with proctree.Popen.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs import time; type checkers take this as True
if TYPE_CHECKING:
    from typing import Any

_VARARGS, _VARKEYWORDS = 0x04, 0x08  # inspect.CO_VARARGS and CO_VARKEYWORDS


def with_parameters_of(base_init: Any, fallback: Any, extras: tuple[str, ...]) -> Any:
    """A function taking base_init's parameters and the keyword-only extras (default False), which calls
    self._proctree_init(*extras, positional_tuple, keyword_only_dict) with what it was given.

    fallback (returned unchanged) where base_init's parameters cannot be
    copied: it takes *args or **kwargs, or a parameter name would clash.
    """
    code = getattr(base_init, "__code__", None)
    if code is None or code.co_flags & (_VARARGS | _VARKEYWORDS):
        return fallback
    names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
    positional, keyword_only = names[1 : code.co_argcount], names[code.co_argcount :]  # names[0] is self
    if not names or set(names) & set(extras) or any(n.startswith("_proctree") for n in names):
        return fallback
    defaults = base_init.__defaults__ or ()
    kwdefaults = base_init.__kwdefaults__ or {}
    first_default = len(positional) - len(defaults)
    params = [names[0]]
    for i, name in enumerate(positional):
        params.append(f"{name}=_proctree_defaults[{i - first_default}]" if i >= first_default else name)
    params.append("*")
    params += [f"{n}=_proctree_kwdefaults[{n!r}]" if n in kwdefaults else n for n in keyword_only]
    params += [f"{n}=False" for n in extras]
    call = ", ".join(
        [
            *extras,
            f"({''.join(n + ', ' for n in positional)})",
            "{" + ", ".join(f"{n!r}: {n}" for n in keyword_only) + "}",
        ]
    )
    source = f"def __init__({', '.join(params)}):\n    {names[0]}._proctree_init({call})\n"
    namespace: dict[str, Any] = {"_proctree_defaults": defaults, "_proctree_kwdefaults": kwdefaults}
    exec(compile(source, f"<proctree.Popen.__init__: {base_init.__qualname__}'s parameters>", "exec"), namespace)
    made = namespace["__init__"]
    made.__qualname__ = fallback.__qualname__
    made.__module__ = fallback.__module__
    made.__doc__ = fallback.__doc__
    return made
