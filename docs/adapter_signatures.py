"""A Griffe extension for the API reference: the river and scikit-learn adapters make their ``__init__`` from
their learners' signatures (``nctl.adapter_params``), which reading the source cannot see; this gives each
such class the signature Python reports for it, defaults written as their values."""

import importlib
import inspect

import griffe

KINDS = {inspect.Parameter.POSITIONAL_OR_KEYWORD: griffe.ParameterKind.positional_or_keyword,
         inspect.Parameter.KEYWORD_ONLY: griffe.ParameterKind.keyword_only}


def made_by_adapter_init(member) -> bool:
    return isinstance(member, griffe.Attribute) and str(member.value).startswith("adapter_init(")


class AdapterSignatures(griffe.Extension):
    def on_class_members(self, *, cls: griffe.Class, **kwargs) -> None:
        init = cls.members.get("__init__")
        if not made_by_adapter_init(init):
            return
        runtime = getattr(importlib.import_module(cls.module.path), cls.name)
        parameters = [griffe.Parameter("self", kind=griffe.ParameterKind.positional_or_keyword)]
        for parameter in inspect.signature(runtime).parameters.values():
            parameters.append(griffe.Parameter(parameter.name, annotation=parameter.annotation,
                                               kind=KINDS[parameter.kind], default=repr(parameter.default)))
        cls.set_member("__init__", griffe.Function("__init__", parameters=griffe.Parameters(*parameters),
                                                   lineno=init.lineno, endlineno=init.endlineno))
