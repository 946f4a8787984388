"""A training run: its folder of checkpoints, what it keeps of its data, and what happens after each step.

`train.py` builds a TrainingRun to save and resume, and reports each step it takes to a StepReport, which
does the rest: the same in every chapter, so that train.py's loop shows the step itself.
"""

import math
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace

import torch
import torch.distributed as dist

from common.data.tokenizers import Tokenizer
from common.errors import CourseError
from common.files import in_repo, portable, portable_settings
from common.progress import progress
from common.training.checkpoint import (
    check_compatible,
    checkpoint_path,
    checkpoints_of,
    clean_state_dict,
    newest_checkpoint,
    open_checkpoint,
    prune_checkpoints,
    rng_state,
    save_checkpoint,
    set_rng_state,
)
from common.training.interrupt import GracefulInterrupt
from common.training.metrics import MetricsLog, check_finite, mfu

DATA_SETTINGS = ("CORPUS", "TEXT_FILE", "TOKENIZER", "VOCAB_SIZE", "VAL_FRACTION")  # what prepares the data


def data_record(data_dir: Path, tokenizer: Tokenizer) -> dict:
    """What a checkpoint keeps of the data its model was trained on: the prepared-data folder, portable()
    (relative to the repository), and the tokenizer's own files, which are small (a few hundred kB) and all
    that using the model needs, so a checkpoint samples in a clone that never prepared that data."""
    with tempfile.TemporaryDirectory() as folder:
        tokenizer.save(Path(folder))
        files = {path.name: path.read_bytes() for path in sorted(Path(folder).iterdir())}
    return {"data_dir": portable(data_dir), "tokenizer_files": files}


def checkpoint_tokenizer(state: dict, load_tokenizer: Callable[[Path], Tokenizer]) -> Tokenizer:
    """The tokenizer a checkpoint's model was trained with, read by the chapter's `load_tokenizer` from the
    files the checkpoint carries."""
    with tempfile.TemporaryDirectory() as folder:
        for name, data in state["tokenizer_files"].items():
            (Path(folder) / name).write_bytes(data)
        return load_tokenizer(Path(folder))


def checkpoint_data_dir(state: dict, load_tokenizer: Callable[[Path], Tokenizer]) -> Path:
    """The prepared-data folder a checkpoint's model was trained on, in this clone, for scripts that read its
    token files or held-out documents; checked to hold the checkpoint's own tokenizer, since data prepared
    again with other settings would feed the model ids it never learned."""
    folder = in_repo(state["data_dir"])
    settings = " ".join(f"--{name}={value}" for name, value in state.get("config", {}).items()
                        if name in DATA_SETTINGS and value is not None)
    if not folder.is_dir():
        raise CourseError(f"error: the data this model was trained on ({state['data_dir']}) is not in this "
                          f"clone; prepare it with the chapter's download_data.py {settings}")
    if data_record(folder, load_tokenizer(folder))["tokenizer_files"] != state["tokenizer_files"]:
        raise CourseError(f"error: {folder} was prepared with another tokenizer than this model's; prepare "
                          f"its data again with the chapter's download_data.py {settings}")
    return folder


def set_aside_previous_run(out_dir: Path, prefix: str, extra_files: Sequence[str] = ()) -> Path | None:
    """Move an earlier run's checkpoints (and files such as its metrics) into out_dir/previous/<N>/.

    A fresh run in a folder that already holds one must neither delete it (nothing is lost) nor mix with it:
    `latest` and keep-K go by iteration number, so an older, longer run would win over the new one.
    """
    out_dir = Path(out_dir)
    old = [path for _, path in checkpoints_of(out_dir, prefix)]
    old += [out_dir / name for name in extra_files if (out_dir / name).exists()]
    if not old:
        return None
    previous = out_dir / "previous"
    earlier_runs = len(list(previous.iterdir())) if previous.exists() else 0
    target = previous / str(earlier_runs + 1)
    target.mkdir(parents=True)
    for path in old:
        path.rename(target / path.name)
    return target


RUN_FILES = ("metrics.jsonl", "loss.png", "summary.json")  # what a run leaves beside its checkpoints


class TrainingRun:
    """One training run's checkpoints, in the folder cfg.OUT_DIR:

        run = TrainingRun(cfg, "gpt", "project1/gpt", model=model, optimizer=optimizer, scaler=scaler,
                          batches=batches, data_dir=data_dir, tokenizer=tokenizer)
        step = run.resume(shape_keys)  # cfg.RESUME's step, or 0 for a fresh run
        path = run.save(step, loss)  # a checkpoint resume() restores exactly (the newest few are kept)

    A checkpoint holds everything a run needs to continue as if it had never stopped: the weights, the
    optimizer's moments, the gradient scaler, the batch sampler's position (`batches`: anything with
    state_dict() and load_state_dict()) and every random generator; plus the model's config (a dataclass,
    model.config), so a script can rebuild the model without knowing the settings that made it, the run's
    settings, its data (data_record: the prepared-data folder and the tokenizer's files), and what the
    chapter adds in `extra`.
    """

    def __init__(self, cfg: SimpleNamespace, prefix: str, kind: str, *, model: torch.nn.Module,
                 optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler, batches, data_dir: Path,
                 tokenizer: Tokenizer, extra: dict | None = None):
        self.out_dir, self.prefix, self.kind = Path(cfg.OUT_DIR), prefix, kind
        self.spec, self.keep = cfg.RESUME, cfg.KEEP_CHECKPOINTS
        self.model, self.optimizer, self.scaler, self.batches = model, optimizer, scaler, batches
        self.extra = {"config": portable_settings(vars(cfg)), **data_record(data_dir, tokenizer),
                      **(extra or {})}

    def newest(self) -> Path | None:
        """The newest checkpoint on disk: what a resume starts from."""
        return newest_checkpoint(self.out_dir, self.prefix)

    def save(self, step: int, loss: float, rng: dict | list[dict] | None = None) -> Path:
        """Save this step. A data-parallel run passes `rng`, every process's rng_state() in rank order
        (gathered by the caller), since each process draws its own dropout masks."""
        path = checkpoint_path(self.out_dir, self.prefix, step, loss)
        save_checkpoint(path, {
            "kind": self.kind, "model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
            "scaler": self.scaler.state_dict(), "model_config": asdict(self.model.config), "step": step,
            "rng": rng_state() if rng is None else rng, "batches": self.batches.state_dict(),
            "metrics": {"loss": loss}, **self.extra,
        })
        prune_checkpoints(self.out_dir, self.prefix, self.keep)
        return path

    def resume(self, shape_keys: Sequence[str], rank: int = 0) -> int:
        """Continue from the checkpoint cfg.RESUME names ("latest" or a path) and return its step; without
        one, start a fresh run at step 0.

        A checkpoint of another model shape (`shape_keys` of model.config) is refused with a line that names
        the fix. A fresh run first moves an earlier run in the same folder out of the way
        (set_aside_previous_run), so the two never mix; in a data-parallel run only rank 0 touches files,
        and each process restores its own random generators.
        """
        if not self.spec:
            if rank == 0 and (previous := set_aside_previous_run(self.out_dir, self.prefix, RUN_FILES)):
                print(f"{self.out_dir} held an earlier run: moved it to {previous} "
                      "(use --RESUME=latest to continue a run)")
            return 0
        path, state = open_checkpoint(self.spec, self.out_dir, self.prefix, kind=self.kind,
                                      map_location=next(self.model.parameters()).device)
        check_compatible(state["model_config"], asdict(self.model.config), shape_keys)
        self.model.load_state_dict(clean_state_dict(state["model"]))
        kernels = [{key: group.get(key) for key in ("fused", "foreach")}
                   for group in self.optimizer.param_groups]
        self.optimizer.load_state_dict(state["optimizer"])
        for group, chosen in zip(self.optimizer.param_groups, kernels, strict=True):
            group.update(chosen)  # this device's AdamW kernel, not the one of the machine that saved it
        if state["scaler"]:  # empty when the saving run had no fp16 to scale (bf16, MPS or CPU)
            self.scaler.load_state_dict(state["scaler"])
        self.batches.load_state_dict(state["batches"])
        rng = state["rng"]  # a list, one per process, when a data-parallel run saved it
        set_rng_state(rng[min(rank, len(rng) - 1)] if isinstance(rng, list) else rng)
        print(f"resumed from {path} at step {state['step']}")
        return state["step"]


class StepReport:
    """What happens after every optimizer step of a long run, the same in each chapter:

        with StepReport(run, cfg, step, evaluate=lambda: {"val_loss": ...}, script=SCRIPT) as report:
            while step < cfg.MAX_ITERS:
                ...  # the step: forward, loss, backward, clipping, optimizer step
                step += 1
                report.after(step, train_loss, lr=lr, tokens=tokens_per_step)

    After each step: stop on a loss that is NaN or infinite; a line in metrics.jsonl; the progress bar; every
    EVAL_INTERVAL steps and at the last, `evaluate()` (its dict is logged and kept as `report.val`) and a
    checkpoint (`show` names more of the step's or the evaluation's numbers for the bar); after a Ctrl-C, a
    checkpoint of this step and a clean exit. In a data-parallel run every process calls it, they agree on
    when to stop and save the same step, and only rank 0 evaluates and writes.
    """

    def __init__(self, run: TrainingRun, cfg: SimpleNamespace, step: int, *, evaluate: Callable[[], dict],
                 script: str, flops_per_token: float | None = None, rank: int = 0, world_size: int = 1,
                 show: Sequence[str] = ()):
        self.run, self.cfg, self.evaluate, self.script, self.shown = run, cfg, evaluate, script, show
        self.flops_per_token, self.rank, self.world_size = flops_per_token, rank, world_size
        self.device = next(run.model.parameters()).device
        self.val: dict = {}  # the newest evaluation
        self.last_path: Path | None = None  # the newest checkpoint this run saved
        self.log = MetricsLog(run.out_dir / "metrics.jsonl", resume_step=step if cfg.RESUME else None) \
            if rank == 0 else None
        self.bar = progress(cfg.MAX_ITERS, initial=step) if rank == 0 else None
        self.interrupt = GracefulInterrupt(newest=run.newest)

    def __enter__(self) -> "StepReport":
        self.interrupt.__enter__()
        self.start = self.since = time.perf_counter()
        return self

    def __exit__(self, *exc) -> bool:
        self.seconds = time.perf_counter() - self.start
        if self.bar is not None:
            self.bar.close()
        return self.interrupt.__exit__(*exc)

    def after(self, step: int, train_loss: float, *, lr: float, tokens: int, **metrics: float) -> None:
        """Report step `step` (counted from 1), which read `tokens` tokens over all processes."""
        check_finite(train_loss, step, self.last_path)
        seconds = time.perf_counter() - self.since  # the step alone: evaluation and saving come after
        record = {"train_loss": train_loss, "lr": lr, **metrics, "step_seconds": seconds,
                  "tokens_per_second": tokens / seconds}
        evaluating = step % self.cfg.EVAL_INTERVAL == 0 or step == self.cfg.MAX_ITERS
        stopping = agree_to_stop(self.interrupt, self.world_size, self.device) and step < self.cfg.MAX_ITERS
        if evaluating and self.rank == 0:
            self.val = self.evaluate()
            record.update({k: v for k, v in self.val.items() if isinstance(v, int | float)})
        if evaluating or stopping:
            rng = every_rng_state(self.world_size)  # every process takes part; only rank 0 writes
            if self.rank == 0:
                self.last_path = self.run.save(step, record.get("val_loss", train_loss), rng=rng)
        if self.rank == 0:
            self.log.log(step, **record)
            self.show(record)
        if stopping:
            if self.bar is not None:
                self.bar.close()
            self.interrupt.exit_saved(self.last_path, self.script)
        self.since = time.perf_counter()

    def show(self, record: dict) -> None:
        utilisation = None if self.flops_per_token is None else \
            mfu(self.flops_per_token, record["tokens_per_second"] / self.world_size, self.device)  # per GPU
        val_loss = self.val.get("val_loss", math.nan)
        chapter = {key: f"{record.get(key, self.val.get(key, math.nan)):.3f}" for key in self.shown}
        self.bar.set_postfix(loss=f"{record['train_loss']:.3f}", val=f"{val_loss:.3f}", **chapter,
                             tok_s=f"{record['tokens_per_second']:,.0f}", refresh=False,
                             **({} if utilisation is None else {"mfu": f"{utilisation:.0%}"}))
        self.bar.update()  # redraws at most every 0.1 s on a terminal, every 10 s into a log file


def agree_to_stop(interrupt: GracefulInterrupt, world_size: int, device: torch.device) -> bool:
    """Whether to stop after this step. Ctrl-C reaches every process torchrun started, but not necessarily
    between the same two steps: the processes stop if any of them saw it, so all of them save the same step.
    (The flag lives on the process's device, as every tensor a collective sees must: NCCL reduces GPU tensors
    only.)"""
    if world_size == 1:
        return interrupt.requested
    flag = torch.tensor(float(interrupt.requested), device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag.item())


def every_rng_state(world_size: int) -> list[dict] | None:
    """Every process's random generators, in rank order (each draws its own dropout masks); None alone."""
    if world_size == 1:
        return None
    states = [None] * world_size
    dist.all_gather_object(states, rng_state())
    return states
