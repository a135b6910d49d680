"""No selector: the client uploads its full update."""

from fedsweep.components.selectors.base import Selector
from fedsweep.core.registry import register


@register("selector", "none", default=True)
class NoSelector(Selector):
    """The base method's own upload, with every base method (``uploads = None``)."""
