"""One FL run: set-up (data, partition, model, clients, components) and the loop over rounds.

``FLRun`` builds what the round needs from a validated ``RunConfig``: the data and partition,
the model as a flat vector, the clients with their batch schedules, and one component per slot
of the round (``fedsweep.components.compose.build_components``). The round itself is
``engine.round.federated_round``; the loop over rounds is ``run_federated``, which hands every
round's metrics to a list of observers (``engine.observers``). Nothing here knows a particular
algorithm. Per-round numbers stay tensors until one host transfer per round.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import torch

from fedsweep.components.compose import SAMPLERS, build_components, build_method
from fedsweep.components.hooks.base import HookEnv
from fedsweep.config.schema import RunConfig
from fedsweep.core.device import keep_freed_memory, resolve_device, set_threads
from fedsweep.core.messages import ClientTask, ClientUpdate, RoundContext
from fedsweep.core.seeding import numpy_rng, torch_generator, torch_seed
from fedsweep.data.datasets import TensorDataset, load_dataset
from fedsweep.data.partitions import make_partition, partition_hash
from fedsweep.engine.batches import BatchSchedule, Client, client_batch_size
from fedsweep.engine.evaluation import Evaluator
from fedsweep.engine.functional import FunctionalModel
from fedsweep.engine.local import LocalTrainer
from fedsweep.engine.observers import DivergenceWatch, Observer, as_observers
from fedsweep.engine.oracle import ClientOracle
from fedsweep.engine.round import federated_round
from fedsweep.models.registry import build_model

DTYPES = {"float32": torch.float32, "float64": torch.float64}
#: the per-round record of the sampled clients (only when the sampler is not ``full``)
COHORT_RECORD = "cohort"

__all__ = ["Client", "FLRun", "RunResult", "run_federated", "to_floats"]


@dataclass
class RunResult:
    status: str  # "finished" | "diverged"
    rounds: int  # rounds completed
    final: dict[str, float]
    history: list[dict[str, float]] = field(default_factory=list)


class FLRun:
    """Builds everything a run needs from a validated ``RunConfig``; ``run()`` trains it."""

    def __init__(self, config: RunConfig, dataset: TensorDataset | None = None, on_stage=None):
        """``on_stage(text)``, if given, is told what set-up is doing (for a status line)."""
        stage = on_stage or (lambda text: None)
        self.config = config
        self.device = resolve_device(config.device)
        self.threads = set_threads(config.threads)
        keep_freed_memory()
        self.dtype = DTYPES[config.train.dtype]
        if dataset is None:
            stage(f"loading data ({config.data.dataset})")
        data = dataset or load_dataset(
            config.data.dataset,
            root=config.data.root,
            device=self.device,
            normalization=config.data.normalization,
            download=config.data.download,
        )
        self.dataset = data
        self.x_train = data.x_train.to(self.device, self.dtype)
        self.y_train = data.y_train.to(self.device)
        self.x_test = data.x_test.to(self.device, self.dtype)
        self.y_test = data.y_test.to(self.device)
        self.holdout = None  # the public rows no client sees (``data.holdout``)
        if config.data.holdout:
            keep = len(self.y_train) - config.data.holdout
            self.holdout = (self.x_train[keep:], self.y_train[keep:])
            self.x_train, self.y_train = self.x_train[:keep], self.y_train[:keep]
        if config.data.train_subset is not None:
            self.x_train = self.x_train[: config.data.train_subset]
            self.y_train = self.y_train[: config.data.train_subset]
        if config.eval.test_subset is not None:
            self.x_test = self.x_test[: config.eval.test_subset]
            self.y_test = self.y_test[: config.eval.test_subset]

        stage(f"partitioning, building the model ({config.model.name})")
        self.method = build_method(config)
        self.parts = self._partition()
        self.partition_hash = partition_hash(self.parts)
        self.model = self._build_model()
        self.fm = FunctionalModel(self.model)
        self.w = self.fm.flatten()
        self.clients = self._make_clients()
        sizes = [c.num_samples for c in self.clients]
        sizes_t = torch.tensor(sizes, dtype=torch.float64)
        self.p = sizes_t / sizes_t.sum()  # p_i = |D_i| / |D|
        problems = SAMPLERS[config.sampler].partition_errors(config, sizes)
        if problems:
            raise ValueError("; ".join(problems))
        self.components = build_components(config, self.method, self.p, sizes)
        self.selector = self.components.selector
        for client, tau in zip(
            self.clients, self.components.step_policy.nominal_steps(), strict=True
        ):
            client.num_steps = tau
        self.method.setup(self.w, len(self.clients))
        self.components.server_opt.setup(self.w)
        self.oracle = ClientOracle(
            self.fm,
            self.x_train,
            self.y_train,
            [c.indices for c in self.clients],
            config.eval.batch_size,
            config.train.batch_size,
        )
        self.public = None
        if any(h.needs_public_data for h in self.components.hooks):
            stage("loading the leash data")
            self.public = self._load_public()
        env = HookEnv(
            self.fm,
            self.oracle,
            config.seed,
            config.eval.batch_size,
            self.components.lr_schedule.lr(1),
            self.public,
        )
        for hook in self.components.hooks:
            hook.bind(env)
            self.w = hook.setup(self.w)
        observers = self.components.step_observers()
        for obs in observers:
            obs.bind(self.fm, self.oracle)
        self.trainer = LocalTrainer(
            self.fm, self.x_train, self.y_train, self.method, self.selector, observers
        )
        self.diagnostics = self.components.diagnostics()
        self.evaluator = Evaluator(
            self.fm,
            (self.x_test, self.y_test),
            (self.x_train, self.y_train),
            self.clients,
            config.eval,
        )
        self.round = 0
        self.records: dict[str, list[torch.Tensor]] = {}
        self.record_rounds: dict[str, list[int]] = {}

    # ----------------------------------------------------------------- set-up
    def _partition(self) -> list[np.ndarray]:
        cfg = self.config.data
        labels = self.y_train.cpu().numpy()
        if self.method.pools_data:
            return [np.arange(len(labels), dtype=np.int64)]
        options = {
            "case1": {"mode": cfg.case1_mode},
            "dirichlet": {"alpha": cfg.dirichlet_alpha},
            "shards": {"shards_per_client": cfg.shards_per_client},
        }.get(cfg.partition, {})
        return make_partition(
            cfg.partition,
            labels,
            cfg.num_clients,
            rng=numpy_rng(self.config.seed, "partition"),
            num_classes=self.dataset.num_classes,
            quantity_skew=cfg.quantity_skew,
            quantity_skew_exponent=cfg.quantity_skew_exponent,
            **options,
        )

    def _build_model(self):
        cfg = self.config.model
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(torch_seed(self.config.seed, "model_init"))
            model = build_model(
                cfg.name,
                self.dataset.input_shape,
                self.dataset.num_classes,
                svm_lambda=cfg.svm_lambda,
                cnn_lrn=cfg.cnn_lrn,
                resnet_weights=cfg.resnet_weights,
                resnet_weights_path=cfg.resnet_weights_path,
            )
        return model.to(self.device, self.dtype)

    def _load_public(self):
        """The server's public (leash) data, preprocessed like the FL data, on the run's device
        and dtype (``fedsweep.data.leash``)."""
        from dataclasses import replace

        from fedsweep.data.leash import load_leash

        cfg = self.config
        data = load_leash(
            cfg.leash, cfg.data, self.x_train, self.y_train, self.holdout, cfg.data.normalization
        )
        return replace(data, x=data.x.to(self.device, self.dtype), y=data.y.to(self.device))

    def _make_clients(self) -> list[Client]:
        train = self.config.train
        clients = []
        for i, part in enumerate(self.parts):
            if len(part) == 0:
                raise ValueError(f"client {i} received no data under {self.config.data.partition}")
            schedule = BatchSchedule(
                len(part),
                client_batch_size(train.batch_size, len(part)),
                train.order,
                torch_generator(self.config.seed, "client_order", i),
            )
            indices = torch.as_tensor(part, dtype=torch.long, device=self.device)
            clients.append(Client(i, indices, 0, schedule))  # num_steps: the step policy's
        return clients

    # ------------------------------------------------------------------ round
    def local_train(self, client: Client, ctx: RoundContext) -> ClientUpdate:
        """Client ``client``'s round-1 number of local steps from ``w`` at ``ctx.lr``."""
        task = ClientTask(client.index, client.num_steps, ctx.lr)
        return self.trainer.train(client, task, self.w, ctx)

    def step(self) -> dict[str, torch.Tensor]:
        """One communication round; returns this round's metrics as 0-dim tensors."""
        self.round += 1
        t, cfg = self.round, self.config
        rng = numpy_rng(cfg.seed, "selection", t)  # this round's own cohort stream (§1.6)
        out = federated_round(
            t,
            self.w,
            self.components,
            self.clients,
            self.trainer,
            self.oracle,
            rng,
            cfg.train.local_epochs,
        )
        self.w = out.w
        metrics: dict[str, torch.Tensor] = {}
        for u in out.updates:
            for name, value in u.metrics.items():
                metrics[f"client/{u.client}/{name}"] = value
            for name, value in u.records.items():
                self._record(f"{name}_client{u.client}", value)
        metrics.update(out.cohort.metrics)
        metrics.update(self.components.selector.metrics)
        metrics.update(self.components.step_policy.metrics)
        for hook in self.components.hooks:
            metrics.update(hook.metrics)
        if self.components.sampler.records_cohort:
            draws = out.cohort.draws if out.cohort.draws is not None else out.cohort.clients
            self._record(COHORT_RECORD, torch.tensor(draws, dtype=torch.long))
        if self.evaluator.due(t, cfg.train.rounds):
            metrics.update(self.evaluator.evaluate(self.w))
        return metrics

    def _record(self, name: str, value: torch.Tensor) -> None:
        self.records.setdefault(name, []).append(value.cpu())
        self.record_rounds.setdefault(name, []).append(self.round)

    def evaluate(self) -> dict[str, torch.Tensor]:
        return self.evaluator.evaluate(self.w)

    # -------------------------------------------------------------- the loop
    def run(self, on_round=None, observers=()) -> RunResult:
        """Run until ``train.rounds`` or divergence; ``on_round(t, metrics, result)`` (plain
        floats, after every round) is the first observer."""
        return run_federated(self, [*self.watches(), on_round, *observers])

    def watches(self) -> list[Observer]:
        """The observers every run of this engine has, first in its list: the divergence
        watch."""
        return [DivergenceWatch(lambda: self.w, self.diagnostics)]

    # ------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict:
        """Everything needed to continue this run exactly: round, global model, buffers, every
        component's state, every client's batch cursor/permutation/RNG, and the records."""
        state = {
            "round": self.round,
            "partition_hash": self.partition_hash,
            "w": self.w.detach().cpu().clone(),
            "buffers": {k: v.detach().cpu().clone() for k, v in self.fm.buffers.items()},
            "schedules": [c.schedule.state_dict() for c in self.clients],
            "records": {k: [t.clone() for t in v] for k, v in self.records.items()},
            "record_rounds": {k: list(v) for k, v in self.record_rounds.items()},
        }
        for key, part in self.components.parts().items():
            state[key] = part.state_dict()
        return state

    def load_state_dict(self, state: dict) -> None:
        if state["partition_hash"] != self.partition_hash:
            raise ValueError(
                f"checkpoint partition {state['partition_hash']} does not match this run's "
                f"{self.partition_hash}: the data or partition changed since it was written"
            )
        self.round = int(state["round"])
        self.w = state["w"].to(self.device, self.dtype)
        for name, value in state["buffers"].items():
            self.fm.buffers[name].copy_(value)
        state = _upgrade(state)
        for key, part in self.components.parts().items():
            part.load_state_dict(state.get(key, {}))
        for client, sched in zip(self.clients, state["schedules"], strict=True):
            client.schedule.load_state_dict(sched)
        self.records = {k: [t.clone() for t in v] for k, v in state["records"].items()}
        self.record_rounds = {
            k: list(state.get("record_rounds", {}).get(k, range(1, len(v) + 1)))
            for k, v in self.records.items()
        }

    def record_arrays(self) -> dict[str, np.ndarray]:
        """Per-round records stacked over rounds, e.g. ``selected_client0`` of shape [T, τ_0].
        A record that skips rounds (its client was not sampled) comes with ``<name>_rounds``,
        the rounds its rows belong to."""
        out = {}
        for name, values in self.records.items():
            out[name] = torch.stack(values).numpy()
            rounds = self.record_rounds.get(name, [])
            if rounds != list(range(1, len(rounds) + 1)) or len(rounds) != self.round:
                out[f"{name}_rounds"] = np.asarray(rounds, dtype=np.int64)
        return out


def _upgrade(state: dict) -> dict:
    """Checkpoints written before the server optimizer was a component kept FedNova's server
    momentum buffer (``gmf``) in the method's state: hand it to the server optimizer."""
    if "server_opt" not in state and (state.get("method") or {}).get("buf") is not None:
        state = {**state, "server_opt": {"buf": state["method"]["buf"]}}
    return state


def run_federated(run: FLRun, observers=()) -> RunResult:
    """The loop (FedJAX's ``run_federated_experiment`` shape): rounds until ``train.rounds`` or
    an observer stops the run (``run.watches()``, first in the list, stops a diverged one); every
    round's metrics (plain floats, one host transfer) go to each observer in order, with the
    metrics the earlier ones added; ``on_end`` after the last round, ``on_abort`` if an
    exception leaves."""
    observers = as_observers(observers)
    result = RunResult("finished", run.round, {})
    run.model.train()
    try:
        while run.round < run.config.train.rounds:
            start = time.perf_counter()
            metrics = to_floats(run.step())
            metrics["round_time"] = time.perf_counter() - start
            result.rounds = run.round
            result.final.update(metrics)
            stop = False
            for observer in observers:
                action = observer.on_round(run.round, metrics, result)
                if action is None:
                    continue
                metrics.update(action.metrics)
                result.final.update(action.metrics)
                if action.stop and not stop:
                    stop, result.status = True, action.status
            if stop:
                break
    except KeyboardInterrupt:
        for observer in observers:
            observer.on_abort("killed")
        raise
    except Exception:
        for observer in observers:
            observer.on_abort("failed")
        raise
    for observer in observers:
        observer.on_end(result)
    return result


def to_floats(tensors: dict[str, torch.Tensor]) -> dict[str, float]:
    """Convert a dict of 0-dim tensors with a single host transfer."""
    if not tensors:
        return {}
    keys = list(tensors)
    values = torch.stack([tensors[k].detach().to("cpu", torch.float64) for k in keys]).tolist()
    return dict(zip(keys, values, strict=True))
