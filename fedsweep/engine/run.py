"""One FL run: set-up (data, partition, model, clients, method, selector) and the round loop.

The round is docs/algorithms.md §1.4. The engine calls the base method's hooks (``begin_client``,
``local_direction``, ``client_update``, ``aggregate``) and the selector's (``begin_client``,
``record``, ``finish_client``, ``finish_round``); it knows nothing about any particular
algorithm. The selector's per-client result comes before the base method's message, so the base
method builds its message from the selected vector (``client_update(..., delta=sel.delta)``).
Per-round numbers stay tensors until one host transfer per round.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field

import numpy as np
import torch

from fedsweep.algorithms.base import ClientUpdate, RoundContext
from fedsweep.algorithms.registry import ALGORITHMS, SELECTORS
from fedsweep.config.schema import RunConfig
from fedsweep.data.datasets import TensorDataset, load_dataset
from fedsweep.data.partitions import make_partition, partition_hash
from fedsweep.engine.batches import BatchSchedule, local_steps
from fedsweep.engine.device import resolve_device, set_threads
from fedsweep.engine.functional import FunctionalModel
from fedsweep.engine.seeding import numpy_rng, torch_generator, torch_seed
from fedsweep.models.registry import build_model

DTYPES = {"float32": torch.float32, "float64": torch.float64}


@dataclass
class Client:
    index: int
    indices: torch.Tensor  # global training indices (on the run's device)
    num_steps: int  # τ_i
    schedule: BatchSchedule

    @property
    def num_samples(self) -> int:
        return len(self.indices)


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
        if config.data.train_subset is not None:
            self.x_train = self.x_train[: config.data.train_subset]
            self.y_train = self.y_train[: config.data.train_subset]
        if config.eval.test_subset is not None:
            self.x_test = self.x_test[: config.eval.test_subset]
            self.y_test = self.y_test[: config.eval.test_subset]

        stage(f"partitioning, building the model ({config.model.name})")
        self.method = ALGORITHMS[config.algorithm](config)
        self.selector = SELECTORS[config.selector](config)
        self.parts = self._partition()
        self.partition_hash = partition_hash(self.parts)
        self.model = self._build_model()
        self.fm = FunctionalModel(self.model)
        self.w = self.fm.flatten()
        self.clients = self._make_clients()
        sizes = torch.tensor([c.num_samples for c in self.clients], dtype=torch.float64)
        self.p = sizes / sizes.sum()  # p_i = |D_i| / |D|
        self.method.setup(self.w, len(self.clients))
        self.round = 0
        self.records: dict[str, list[torch.Tensor]] = {}

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

    def _make_clients(self) -> list[Client]:
        train = self.config.train
        clients = []
        for i, part in enumerate(self.parts):
            if len(part) == 0:
                raise ValueError(f"client {i} received no data under {self.config.data.partition}")
            tau = local_steps(len(part), train.local_epochs, train.batch_size)
            if int(train.local_epochs * len(part) // train.batch_size) == 0:
                warnings.warn(f"client {i}: E|D_i|/B < 1, using tau_i = 1 (§1.2)", stacklevel=2)
            schedule = BatchSchedule(
                len(part),
                train.batch_size,
                train.order,
                torch_generator(self.config.seed, "client_order", i),
            )
            indices = torch.as_tensor(part, dtype=torch.long, device=self.device)
            clients.append(Client(i, indices, tau, schedule))
        return clients

    # ------------------------------------------------------------------ round
    def participants(self) -> list[Client]:
        """``S_t``: all clients (client samplers plug in here)."""
        return self.clients

    def local_train(self, client: Client, ctx: RoundContext) -> ClientUpdate:
        """Client ``i``'s ``τ_i`` local steps from the broadcast ``w`` (§1.4)."""
        w, lr = self.w, ctx.lr
        method, selector = self.method, self.selector
        record = selector.records_gradients
        rows = client.indices[client.schedule.take(client.num_steps).to(self.device)]
        y = w.clone()
        loss_sum = torch.zeros((), dtype=self.dtype, device=self.device)
        selector.begin_client(client.index, client.num_steps, self.fm.dim, self.dtype, self.device)
        method.begin_client(client.index, ctx)
        for step in range(client.num_steps):
            batch = rows[step]
            g, loss = self.fm.gradient(
                y, self.x_train.index_select(0, batch), self.y_train.index_select(0, batch)
            )
            v = method.local_direction(client.index, g, y, w)
            if record:
                selector.record(step, g, v)
            y.sub_(v, alpha=lr)
            loss_sum += loss
        sel = selector.finish_client(client.index, ctx, method)
        update = method.client_update(
            client.index,
            w,
            y,
            client.num_samples,
            client.num_steps,
            ctx,
            delta=None if sel is None else sel.delta,
        )
        update.metrics["local_loss"] = loss_sum / client.num_steps
        if sel is not None:
            update.metrics.update(sel.metrics)
            update.records.update(sel.records)
            update.extras.update(sel.extras)
        return update

    def step(self) -> dict[str, torch.Tensor]:
        """One communication round; returns this round's metrics as 0-dim tensors."""
        self.round += 1
        train = self.config.train
        ctx = RoundContext(self.round, train.lr, train.local_epochs)
        chosen = self.participants()
        q = self.p[[c.index for c in chosen]]
        q = q / q.sum()
        updates = [self.local_train(c, ctx) for c in chosen]
        self.selector.finish_round(updates, q, ctx)
        self.w = self.method.aggregate(self.w, updates, q, ctx)
        metrics: dict[str, torch.Tensor] = {}
        for u in updates:
            for name, value in u.metrics.items():
                metrics[f"client/{u.client}/{name}"] = value
            for name, value in u.records.items():
                self.records.setdefault(f"{name}_client{u.client}", []).append(value.cpu())
        last = self.round == train.rounds
        if self.round % self.config.eval.every == 0 or last:
            metrics.update(self.evaluate())
        return metrics

    @torch.no_grad()
    def evaluate(self) -> dict[str, torch.Tensor]:
        """Global-model metrics of §1.5: test loss/accuracy; train loss/accuracy over the union
        of the clients' data (``F(w) = Σ p_i F_i(w)``, penalty included) and per-client ``F_i``."""
        ev = self.config.eval
        self.model.eval()
        w, fm = self.w, self.fm
        penalty = fm.penalty_value(w)
        out: dict[str, torch.Tensor] = {}
        loss_sum, correct = fm.evaluate(w, self.x_test, self.y_test, ev.batch_size)
        out["test_loss"] = loss_sum / len(self.y_test) + penalty
        out["test_acc"] = correct.to(torch.float64) / len(self.y_test)
        if ev.train_metrics:
            total_loss = torch.zeros((), dtype=torch.float64, device=w.device)
            total_correct = torch.zeros((), dtype=torch.long, device=w.device)
            for c in self.clients:
                ls, cr = fm.evaluate(w, self.x_train, self.y_train, ev.batch_size, c.indices)
                out[f"client/{c.index}/train_loss"] = ls / c.num_samples + penalty
                total_loss += ls.to(torch.float64)
                total_correct += cr
            n = sum(c.num_samples for c in self.clients)
            out["train_loss"] = total_loss / n + penalty
            out["train_acc"] = total_correct.to(torch.float64) / n
        self.model.train()
        return out

    # -------------------------------------------------------------- the loop
    def run(self, on_round=None) -> RunResult:
        """Run until ``train.rounds`` or divergence. ``on_round(t, metrics, result)`` is called
        after every round with plain floats (one host transfer per round)."""
        result = RunResult("finished", self.round, {})
        self.model.train()
        while self.round < self.config.train.rounds:
            start = time.perf_counter()
            tensors = self.step()
            finite = torch.isfinite(self.w).all()
            metrics = to_floats(tensors)
            metrics["round_time"] = time.perf_counter() - start
            result.rounds = self.round
            result.final.update(metrics)
            if not bool(finite) or not all(np.isfinite(v) for v in metrics.values()):
                result.status = "diverged"
            if on_round is not None:
                on_round(self.round, metrics, result)
            if result.status == "diverged":
                break
        return result

    # ------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict:
        """Everything needed to continue this run exactly: round, global model, buffers, method
        and selector state, every client's batch cursor/permutation/RNG, and the records."""
        return {
            "round": self.round,
            "partition_hash": self.partition_hash,
            "w": self.w.detach().cpu().clone(),
            "buffers": {k: v.detach().cpu().clone() for k, v in self.fm.buffers.items()},
            "method": self.method.state_dict(),
            "selector": self.selector.state_dict(),
            "schedules": [c.schedule.state_dict() for c in self.clients],
            "records": {k: [t.clone() for t in v] for k, v in self.records.items()},
        }

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
        self.method.load_state_dict(state["method"])
        self.selector.load_state_dict(state["selector"])
        for client, sched in zip(self.clients, state["schedules"], strict=True):
            client.schedule.load_state_dict(sched)
        self.records = {k: [t.clone() for t in v] for k, v in state["records"].items()}

    def record_arrays(self) -> dict[str, np.ndarray]:
        """Per-round records stacked over rounds, e.g. ``selected_client0`` of shape [T, τ_0]."""
        return {k: torch.stack(v).numpy() for k, v in self.records.items()}


def to_floats(tensors: dict[str, torch.Tensor]) -> dict[str, float]:
    """Convert a dict of 0-dim tensors with a single host transfer."""
    if not tensors:
        return {}
    keys = list(tensors)
    values = torch.stack([tensors[k].detach().to("cpu", torch.float64) for k in keys]).tolist()
    return dict(zip(keys, values, strict=True))
