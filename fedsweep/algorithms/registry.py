"""Name -> class registries for base methods and upload selectors, and their valid pairings."""

from __future__ import annotations

from fedsweep.algorithms.centralized import CentralizedSGD
from fedsweep.algorithms.fedavg import FedAvg
from fedsweep.algorithms.fednova import FedNova
from fedsweep.algorithms.fedprox import FedProx
from fedsweep.algorithms.scaffold import Scaffold
from fedsweep.selectors.bherd import BHerd
from fedsweep.selectors.grab import GraB
from fedsweep.selectors.none import NoSelector

ALGORITHMS = {cls.name: cls for cls in (FedAvg, CentralizedSGD, FedProx, FedNova, Scaffold)}
SELECTORS = {cls.name: cls for cls in (NoSelector, BHerd, GraB)}

#: config sections every run uses; the others belong to one method (``config_sections``)
GENERAL_SECTIONS = ("data", "model", "train", "eval", "tracking")
#: the config section of each base method / selector that has hyper-parameters
METHOD_SECTIONS = {
    "fedavg": (),
    "centralized": (),
    "fedprox": ("fedprox",),
    "fednova": ("fednova",),
    "scaffold": ("scaffold",),
    "none": (),
    "bherd": ("bherd",),
    "grab": ("grab",),
}


def config_sections(algorithm: str, selector: str) -> tuple[str, ...]:
    """The config sections that apply to a run: the general ones, then the base method's and
    the selector's own (e.g. BHerd-FedAvg: data, model, train, eval, tracking, bherd)."""
    own = METHOD_SECTIONS.get(algorithm, ()) + METHOD_SECTIONS.get(selector, ())
    return GENERAL_SECTIONS + own


def valid_compositions() -> list[str]:
    """Human-readable list of every valid ``selector x algorithm`` pair."""
    out = [f"{name} (no selector)" for name in ALGORITHMS]
    for sel_name, sel in SELECTORS.items():
        if sel_name != "none":
            out += [f"{sel_name}-{base}" for base in sel.bases]
    return out
