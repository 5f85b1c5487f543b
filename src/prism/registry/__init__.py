"""The handler tree: mega-tool → app → entity → operation."""

from prism.registry.after_commit import AfterCommit
from prism.registry.declare import HandlerApp
from prism.registry.model import Coordinate, Handler, HandlerCall
from prism.registry.params import Params
from prism.registry.registry import Registry

__all__ = ["AfterCommit", "Coordinate", "Handler", "HandlerApp", "HandlerCall", "Params", "Registry"]
