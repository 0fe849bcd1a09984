"""The parameters of the river and scikit-learn adapters, read from their learners' own: an adapter's
``__init__`` has its learner's signature, with the adapter's defaults over the learner's, so a parameter
the learner gains reaches every adapter, and river and scikit-learn, which read ``__init__``'s signature,
see it.

A ``Pool`` default shows as ``pool=None``, which stands for that pool: scikit-learn allows only plain values
as defaults (an object as default would be shared by every estimator that leaves it).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from types import MappingProxyType

from nctl.pool import Pool, accepts_pool_keywords, default_pool

NO_DEFAULTS = MappingProxyType({})


def adapter_pool(learner: type, defaults: Mapping) -> Pool | None:
    """The pool an adapter of ``learner`` with ``defaults`` stands for by ``pool=None``; None for a learner
    without a pool."""
    pool = default_pool(learner)
    return None if pool is None else defaults.get("pool", pool)


def adapter_signature(learner: type, defaults: Mapping = NO_DEFAULTS, without: tuple = ()) -> inspect.Signature:
    """``__init__``'s signature for an adapter of ``learner``: ``self``, then the learner's parameters but
    ``without``, each with its default from ``defaults`` where given, else the learner's; the pool's as None."""
    parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    for name, parameter in inspect.signature(learner).parameters.items():
        if name in without:
            continue
        default = defaults.get(name, parameter.default)
        if name == "pool":
            parameter, default = parameter.replace(annotation="Pool | None"), None
        parameters.append(parameter.replace(default=default))
    return inspect.Signature(parameters)


def adapter_init(learner: type, defaults: Mapping = NO_DEFAULTS, without: tuple = (), then: str | None = None):
    """An adapter's ``__init__`` (``adapter_signature``) that stores every parameter as the attribute of its
    name, as river and scikit-learn read them back, then calls the method ``then`` where given. It also
    takes the pool's flat keywords of earlier releases, with a DeprecationWarning."""
    signature = adapter_signature(learner, defaults, without)

    def __init__(self, *args, **kwargs):
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        for name, value in list(bound.arguments.items())[1:]:
            setattr(self, name, value)
        if then is not None:
            getattr(self, then)()

    __init__.__signature__ = signature
    pool = adapter_pool(learner, defaults)
    if pool is None:
        return __init__
    return accepts_pool_keywords(__init__, pool)


def learner_params(learner: type, defaults: Mapping, params: dict) -> dict:
    """An adapter's parameters ``params`` as its learner takes them: ``pool=None`` is the adapter's pool."""
    if "pool" in params and params["pool"] is None:
        return {**params, "pool": adapter_pool(learner, defaults)}
    return params
