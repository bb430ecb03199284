"""A facade's method stated once: ``delegate(call, to)`` is the method that runs a service's
``call`` on what ``to`` gives of the facade (``Memory``'s kernel, say), with the call's name,
docstring and parameters.

    class Memory:
        replay = delegate(records.replay, to=_kernel)

The parameters and result are the call's (``ParamSpec``): a type checker checks a caller of
``Memory.replay`` against ``records.replay`` itself, and ``help`` and ``inspect.signature`` show
its signature with ``self`` for its first parameter. ``AsyncMemory`` (``airsspec.memory.aio``)
makes its coroutines from ``Memory``'s methods the same way (``like``).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S")
T = TypeVar("T")
O = TypeVar("O")  # noqa: E741 (the owner: the facade a method is made for)
F = TypeVar("F", bound=Callable[..., Any])


def like(method: F, call: Callable[..., Any], *, bound: bool = True, returns: Any = None) -> F:
    """``method``, named and documented as ``call``, with its signature: with ``bound``, the
    first parameter (the service or kernel ``call`` runs on) shown as ``self``; ``returns``:
    the return annotation shown when ``method`` gives something else than ``call``."""
    functools.update_wrapper(method, call)
    signature = inspect.signature(call)
    params = list(signature.parameters.values())
    if bound:
        params[0] = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    shown = signature.replace(parameters=params)
    if returns is not None:
        shown = shown.replace(return_annotation=returns)
    method.__signature__ = shown  # type: ignore[attr-defined]
    return method


def delegate(
    call: Callable[Concatenate[S, P], R], to: Callable[[O], S]
) -> Callable[Concatenate[O, P], R]:
    """The method that runs ``call`` on ``to(self)`` with the arguments it is given."""

    def method(self: O, *args: P.args, **kwargs: P.kwargs) -> R:
        return call(to(self), *args, **kwargs)

    return like(method, call)


def delegate_as(
    call: Callable[Concatenate[S, P], R], to: Callable[[O], S], then: Callable[[R], T], name: str
) -> Callable[Concatenate[O, P], T]:
    """The method ``name`` that runs ``call`` on ``to(self)``, then ``then`` on its result:
    ``call``'s parameters, ``then``'s docstring and result (one call, two answers made of it)."""

    def method(self: O, *args: P.args, **kwargs: P.kwargs) -> T:
        return then(call(to(self), *args, **kwargs))

    like(method, call, returns=then.__annotations__["return"])
    method.__name__ = method.__qualname__ = name
    method.__doc__ = then.__doc__
    return method


__all__ = ["delegate", "delegate_as", "like"]
