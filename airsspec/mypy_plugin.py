"""The mypy plugin that types ``AsyncMemory``'s made calls (``airsspec.memory.aio.Twin``).

A twin (``class AsyncLearnings(Twin[Learnings])``) makes at run time an ``awaited`` call for
every public call of its target it does not state itself. mypy sees none of them in the class:
it reads them through ``Twin.__getattr__`` (declared for the checker only), and this plugin
answers such a read with the target's own call, its parameters as they are and its result a
coroutine's, ``Coroutine[Any, Any, R]``; a name that is no public call of the target is an
error, as a missing attribute is. Enable it in the project's mypy configuration:

    [tool.mypy]
    plugins = ["airsspec.mypy_plugin"]
"""

from __future__ import annotations

from collections.abc import Callable

from mypy import errorcodes as codes
from mypy.checkmember import analyze_member_access
from mypy.maptype import map_instance_to_supertype
from mypy.nodes import MemberExpr
from mypy.plugin import AttributeContext, Plugin
from mypy.types import (
    AnyType,
    CallableType,
    Instance,
    Overloaded,
    Type,
    TypeOfAny,
    get_proper_type,
)

TWIN = "airsspec.memory.aio.Twin"


def _made_call(ctx: AttributeContext) -> Type:
    """The type of ``twin.name`` read through ``Twin.__getattr__``: the target's call
    ``name``, as a coroutine."""
    twin = get_proper_type(ctx.type)
    if not isinstance(twin, Instance) or not isinstance(ctx.context, MemberExpr):
        return ctx.default_attr_type
    name = ctx.context.name
    base = next((b for b in twin.type.mro if b.fullname == TWIN), None)
    if base is None:
        return ctx.default_attr_type
    target = get_proper_type(map_instance_to_supertype(twin, base).args[0])
    if not isinstance(target, Instance) or name.startswith("_"):
        return ctx.default_attr_type
    call = get_proper_type(
        analyze_member_access(
            name,
            target,
            ctx.context,
            is_lvalue=False,
            is_super=False,
            is_operator=False,
            original_type=target,
            chk=ctx.api,  # type: ignore[arg-type]  # the checker, given as its plugin API
            suppress_errors=True,
        )
    )

    def coroutine(item: CallableType) -> CallableType:
        return item.copy_modified(
            ret_type=ctx.api.named_generic_type(
                "typing.Coroutine", [AnyType(TypeOfAny.explicit)] * 2 + [item.ret_type]
            )
        )

    if isinstance(call, CallableType):
        return coroutine(call)
    if isinstance(call, Overloaded):
        return Overloaded([coroutine(item) for item in call.items])
    ctx.api.fail(
        f'"{twin.type.name}" has no attribute "{name}"', ctx.context, code=codes.ATTR_DEFINED
    )
    return AnyType(TypeOfAny.from_error)


class TwinPlugin(Plugin):
    """Types the calls a ``Twin`` makes from its target's (see the module)."""

    def get_attribute_hook(self, fullname: str) -> Callable[[AttributeContext], Type] | None:
        return _made_call if fullname.startswith(TWIN + ".") else None


def plugin(version: str) -> type[Plugin]:
    """mypy's entry point: the plugin, whatever mypy's version."""
    return TwinPlugin
