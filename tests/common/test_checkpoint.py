import dataclasses
import random
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from common import files
from common.data.tokenizers import CharTokenizer, load_tokenizer
from common.errors import CourseError
from common.training.checkpoint import (
    check_compatible,
    checkpoint_path,
    clean_state_dict,
    find_checkpoint,
    load_checkpoint,
    open_checkpoint,
    prune_checkpoints,
    rng_state,
    save_checkpoint,
    set_rng_state,
)
from common.training.run import (
    TrainingRun,
    checkpoint_data_dir,
    checkpoint_tokenizer,
    data_record,
    set_aside_previous_run,
)

KIND = "project1/gpt"


def make_state(step: int) -> dict:
    """A checkpoint shaped like a chapter's. The optimizer state is written out by hand because building
    a torch.optim optimizer imports torch._dynamo, which takes seconds."""
    model = torch.nn.Linear(4, 3)
    optimizer = {
        "state": {0: {"step": torch.tensor(1.0), "exp_avg": torch.randn(3, 4)}},
        "param_groups": [{"lr": 3e-4, "betas": (0.9, 0.95), "params": [0, 1]}],
    }
    return {
        "kind": KIND,
        "model": model.state_dict(),
        "optimizer": optimizer,
        "config": {"N_LAYER": 2, "LEARNING_RATE": 3e-4},
        "step": step,
        "rng": rng_state(),
        "tokenizer": "data/tokenizer",
    }


def test_checkpoint_path_names_step_and_loss(tmp_path):
    assert checkpoint_path(tmp_path, "gpt", 1500, 3.14159) == tmp_path / "gpt_iter1500_loss3.1416.pt"


def test_round_trip_loads_with_weights_only(tmp_path):
    state = make_state(7)
    path = save_checkpoint(checkpoint_path(tmp_path / "new_dir", "gpt", 7, 2.5), state)
    loaded = load_checkpoint(path, kind=KIND)
    assert loaded["step"] == 7
    assert loaded["config"] == state["config"]
    for name, tensor in state["model"].items():
        assert torch.equal(loaded["model"][name], tensor)
    assert torch.equal(loaded["optimizer"]["state"][0]["exp_avg"], state["optimizer"]["state"][0]["exp_avg"])
    assert loaded["optimizer"]["param_groups"] == state["optimizer"]["param_groups"]
    assert [p.name for p in path.parent.iterdir()] == [path.name]


def test_crash_mid_save_keeps_previous_checkpoint(tmp_path, monkeypatch):
    good = save_checkpoint(tmp_path / "gpt.pt", make_state(1))

    def crash_halfway(obj, name):
        Path(name).write_bytes(b"PK\x03\x04 half a checkpoint")
        raise KeyboardInterrupt  # Ctrl-C in the middle of torch.save

    monkeypatch.setattr(torch, "save", crash_halfway)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(good, make_state(2))
    assert load_checkpoint(good, kind=KIND)["step"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["gpt.pt"]


def test_write_error_is_one_line_and_keeps_previous(tmp_path, monkeypatch):
    good = save_checkpoint(tmp_path / "gpt.pt", make_state(1))

    def disk_full(obj, name):
        Path(name).write_bytes(b"PK\x03\x04")
        raise RuntimeError("[enforce fail at inline_container.cc] unexpected pos\nmore detail")

    monkeypatch.setattr(torch, "save", disk_full)
    with pytest.raises(CourseError, match=r"could not write checkpoint .*unexpected pos\); ") as exc:
        save_checkpoint(good, make_state(2))
    assert "\n" not in str(exc.value)
    assert load_checkpoint(good, kind=KIND)["step"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["gpt.pt"]


def test_missing_file(tmp_path):
    with pytest.raises(CourseError, match="no checkpoint at .*train first"):
        load_checkpoint(tmp_path / "nope.pt", kind=KIND)


@pytest.mark.parametrize("keep_fraction", [0.0, 0.01, 0.5, 0.99])
def test_truncated_or_corrupt_file(tmp_path, keep_fraction):
    path = save_checkpoint(tmp_path / "gpt.pt", make_state(1))
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep_fraction)])
    with pytest.raises(CourseError, match="not a readable checkpoint .*delete it") as exc:
        load_checkpoint(path, kind=KIND)
    assert "\n" not in str(exc.value)


def test_garbage_file(tmp_path):
    path = tmp_path / "gpt.pt"
    path.write_bytes(b"this is not a checkpoint" * 50)
    with pytest.raises(CourseError, match="not a readable checkpoint"):
        load_checkpoint(path, kind=KIND)


def test_pickled_object_is_refused(tmp_path):
    path = tmp_path / "evil.pt"
    torch.save({"kind": KIND, "payload": ValueError("arbitrary object")}, path)
    with pytest.raises(CourseError, match="not a readable checkpoint"):
        load_checkpoint(path, kind=KIND)


def test_wrong_kind(tmp_path):
    state = make_state(1) | {"kind": "project3/bert"}
    path = save_checkpoint(tmp_path / "bert.pt", state)
    with pytest.raises(CourseError, match="written by project3/bert, not project1/gpt"):
        load_checkpoint(path, kind=KIND)


def test_not_a_course_checkpoint(tmp_path):
    path = save_checkpoint(tmp_path / "weights.pt", {"weight": torch.zeros(2)})
    with pytest.raises(CourseError, match="not a checkpoint of this course"):
        load_checkpoint(path, kind=KIND)


def save_steps(out_dir, steps):
    for step in steps:
        save_checkpoint(
            checkpoint_path(out_dir, "gpt", step, 10.0 / (step + 1)), {"kind": KIND, "step": step}
        )


def test_latest_uses_step_number_not_text_order(tmp_path):
    save_steps(tmp_path, [900, 1000, 50])
    save_checkpoint(checkpoint_path(tmp_path, "bert", 5000, 1.0), {"kind": "project3/bert"})
    latest = find_checkpoint("latest", tmp_path, "gpt")
    assert latest.name == "gpt_iter1000_loss0.0100.pt"
    assert load_checkpoint(latest, kind=KIND)["step"] == 1000


def test_latest_without_checkpoints(tmp_path):
    with pytest.raises(CourseError, match="no gpt_iter.*train first"):
        find_checkpoint("latest", tmp_path / "missing", "gpt")


def test_explicit_path(tmp_path):
    save_steps(tmp_path, [10])
    path = checkpoint_path(tmp_path, "gpt", 10, 10.0 / 11)
    assert find_checkpoint(str(path), tmp_path, "gpt") == path
    with pytest.raises(CourseError, match="no checkpoint at"):
        find_checkpoint(str(tmp_path / "typo.pt"), tmp_path, "gpt")


def test_keep_newest_k(tmp_path):
    save_steps(tmp_path, [100, 2000, 300, 1000, 20])
    orphan = tmp_path / ".gpt_iter3000_loss0.0033.pt.abc123.tmp"  # left by a killed save
    orphan.write_bytes(b"partial")
    other = checkpoint_path(tmp_path, "bert", 1, 1.0)
    other.write_bytes(b"another chapter")
    prune_checkpoints(tmp_path, "gpt", keep=2)
    remaining = sorted(p.name for p in tmp_path.iterdir())
    assert remaining == [
        "bert_iter1_loss1.0000.pt",
        "gpt_iter1000_loss0.0100.pt",
        "gpt_iter2000_loss0.0050.pt",
    ]
    with pytest.raises(CourseError, match="keep at least 1"):
        prune_checkpoints(tmp_path, "gpt", keep=0)


def draw_all() -> tuple:
    return random.random(), np.random.rand(3).tolist(), np.random.randn(), torch.rand(3).tolist()


def test_rng_round_trip_through_a_checkpoint(tmp_path):
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)
    np.random.randn()  # leaves a cached gaussian in numpy's state, which must survive too
    path = save_checkpoint(tmp_path / "gpt.pt", {"kind": KIND, "rng": rng_state()})
    expected = draw_all()

    random.seed(1)
    np.random.seed(1)
    torch.manual_seed(1)
    assert draw_all() != expected

    set_rng_state(load_checkpoint(path, kind=KIND)["rng"])
    assert draw_all() == expected


def test_clean_state_dict_strips_wrapper_prefixes():
    model = torch.nn.Sequential(torch.nn.Linear(2, 2))
    plain = model.state_dict()
    compiled = {f"_orig_mod.{k}": v for k, v in plain.items()}
    ddp_of_compiled = {f"module._orig_mod.{k}": v for k, v in plain.items()}
    for wrapped in (plain, compiled, ddp_of_compiled):
        cleaned = clean_state_dict(wrapped)
        assert list(cleaned) == ["0.weight", "0.bias"]
        torch.nn.Sequential(torch.nn.Linear(2, 2)).load_state_dict(cleaned)


def test_clean_state_dict_keeps_a_submodule_named_module():
    sd = {"module.weight": torch.zeros(1), "head.weight": torch.zeros(1)}
    assert clean_state_dict(sd) == sd


def test_check_compatible():
    saved = {"N_LAYER": 12, "N_EMBD": 768, "LEARNING_RATE": 3e-4}
    check_compatible(saved, saved | {"LEARNING_RATE": 1e-4}, ["N_LAYER", "N_EMBD"])
    with pytest.raises(CourseError, match=r"N_LAYER 12 -> 6.*resume with --N_LAYER=12 or start a new run"):
        check_compatible(saved, saved | {"N_LAYER": 6}, ["N_LAYER", "N_EMBD"])
    with pytest.raises(CourseError, match=r"resume with --N_EMBD=768 or"):  # a model config's fields
        check_compatible({"n_embd": 768}, {"n_embd": 512}, ["n_embd"])


def test_cuda_states_restore_on_a_machine_with_fewer_gpus(monkeypatch):
    """No GPU here, so stand in for torch.cuda: two saved GPU states, one GPU now."""
    restored = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(
        torch.cuda, "get_rng_state_all", lambda: [torch.full((16,), i, dtype=torch.uint8) for i in (1, 2)]
    )
    monkeypatch.setattr(torch.cuda, "set_rng_state_all", restored.extend)
    state = rng_state()
    assert len(state["cuda"]) == 2
    set_rng_state(state)
    assert len(restored) == 1 and torch.equal(restored[0], torch.full((16,), 1, dtype=torch.uint8))


def test_a_fresh_run_sets_the_previous_one_aside(tmp_path):
    for step in (100, 200):
        save_checkpoint(checkpoint_path(tmp_path, "gpt", step, 1.0), {"kind": "k"})
    (tmp_path / "metrics.jsonl").write_text("{}\n")
    first = set_aside_previous_run(tmp_path, "gpt", ["metrics.jsonl", "loss.png"])
    assert first == tmp_path / "previous" / "1"
    assert sorted(p.name for p in first.iterdir()) == [
        "gpt_iter100_loss1.0000.pt", "gpt_iter200_loss1.0000.pt", "metrics.jsonl"]
    assert not list(tmp_path.glob("*.pt")) and not (tmp_path / "metrics.jsonl").exists()
    assert set_aside_previous_run(tmp_path, "gpt") is None  # nothing left to move
    save_checkpoint(checkpoint_path(tmp_path, "gpt", 5, 1.0), {"kind": "k"})
    assert set_aside_previous_run(tmp_path, "gpt") == tmp_path / "previous" / "2"


# --- a training run's state: TrainingRun.save and TrainingRun.resume ----------------------------------------


@dataclasses.dataclass
class TinyConfig:
    width: int = 4
    dropout: float = 0.1


class TinyModel(torch.nn.Module):
    """What resume needs of a chapter's model: parameters and a dataclass `config`."""

    def __init__(self, config: TinyConfig):
        super().__init__()
        self.config = config
        self.layer = torch.nn.Linear(config.width, 3)


class TinySampler:
    """A batch sampler's resumable part: its private generator."""

    def __init__(self, seed: int):
        self.generator = torch.Generator().manual_seed(seed)

    def state_dict(self) -> dict:
        return {"generator": self.generator.get_state()}

    def load_state_dict(self, state: dict) -> None:
        self.generator.set_state(state["generator"])


TOKENIZER = CharTokenizer(["<unk>"], list("abc "))


def training_run(folder, seed: int, width: int = 4, resume: str = "", keep: int = 3) -> TrainingRun:
    torch.manual_seed(seed)
    model = TinyModel(TinyConfig(width))
    cfg = SimpleNamespace(OUT_DIR=str(folder), RESUME=resume, KEEP_CHECKPOINTS=keep, N_LAYER=2)
    return TrainingRun(cfg, "gpt", KIND, model=model,
                       optimizer=torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
                       scaler=torch.amp.GradScaler("cpu", enabled=False), batches=TinySampler(seed),
                       data_dir=folder / "data", tokenizer=TOKENIZER, extra={"world_size": 1})


def take_a_step(run: TrainingRun) -> None:
    run.model.layer(torch.randn(2, run.model.config.width)).sum().backward()
    run.optimizer.step()
    torch.randint(10, (1,), generator=run.batches.generator)


def test_resume_restores_a_saved_run_exactly(tmp_path, capsys):
    saved = training_run(tmp_path, seed=1)
    take_a_step(saved)
    path = saved.save(7, 2.5)
    assert path == tmp_path / "gpt_iter7_loss2.5000.pt"
    state = load_checkpoint(path, kind=KIND)
    assert state["model_config"] == {"width": 4, "dropout": 0.1} and state["world_size"] == 1
    assert state["config"]["N_LAYER"] == 2  # the run's settings, whole
    assert state["data_dir"] == str(tmp_path / "data")  # outside the repository: recorded whole
    assert checkpoint_tokenizer(state, load_tokenizer).encode("cab") == TOKENIZER.encode("cab")
    expected_next = torch.rand(3)  # what the run would draw next

    resumed = training_run(tmp_path, seed=2, resume="latest")  # other weights, momentum and generators
    assert resumed.resume(shape_keys=("width",)) == 7 and "resumed from" in capsys.readouterr().out
    assert torch.equal(torch.rand(3), expected_next)  # the global generators continue where they were saved
    torch.testing.assert_close(resumed.model.state_dict(), saved.model.state_dict(), atol=0, rtol=0)
    torch.testing.assert_close(resumed.optimizer.state_dict(), saved.optimizer.state_dict(), atol=0, rtol=0)
    assert torch.equal(resumed.batches.generator.get_state(), saved.batches.generator.get_state())


def test_a_gpu_runs_checkpoint_resumes_with_this_machines_optimizer_kernel_and_scaler(tmp_path):
    """A CUDA run saves its optimizer with fused=True and, in bf16, an empty scaler state: resumed on a
    machine without that kernel or with an fp16 scaler, the run keeps its own choices and continues."""
    saved = training_run(tmp_path, seed=1)
    take_a_step(saved)
    path = saved.save(7, 2.5)
    state = torch.load(path, weights_only=True)
    for group in state["optimizer"]["param_groups"]:
        group.update(fused=True, foreach=None)  # as torch.optim.AdamW(..., fused=True) on CUDA saves it
    state["scaler"] = {}  # a disabled scaler's state: bf16 needs no loss scaling
    save_checkpoint(path, state)

    resumed = training_run(tmp_path, seed=2, resume="latest")
    fresh = [(group["fused"], group["foreach"]) for group in resumed.optimizer.param_groups]
    resumed.scaler = torch.amp.GradScaler("cpu", enabled=True)  # an fp16 run's scaler, which refuses {}
    assert resumed.resume(shape_keys=("width",)) == 7
    assert [(group["fused"], group["foreach"]) for group in resumed.optimizer.param_groups] == fresh
    torch.testing.assert_close(resumed.optimizer.state_dict()["state"], saved.optimizer.state_dict()["state"])
    take_a_step(resumed)


def test_each_process_of_a_data_parallel_run_resumes_its_own_generators(tmp_path):
    saved = training_run(tmp_path, seed=1)
    states = []
    for rank in range(2):  # two processes' generators, as the caller gathers them
        torch.manual_seed(100 + rank)
        states.append(rng_state())
    saved.save(3, 1.0, rng=states)
    draws = []
    for rank in range(2):
        training_run(tmp_path, seed=2, resume="latest").resume(shape_keys=("width",), rank=rank)
        draws.append(torch.rand(3))
        set_rng_state(states[rank])
        assert torch.equal(draws[-1], torch.rand(3))  # this process's generator, where it was saved
    assert not torch.equal(*draws)


def test_resume_refuses_another_shape_in_one_line(tmp_path):
    training_run(tmp_path, seed=1).save(1, 1.0)
    with pytest.raises(CourseError, match=r"width 4 -> 8.*resume with --WIDTH=4") as exit_info:
        training_run(tmp_path, seed=1, width=8, resume="latest").resume(shape_keys=("width",))
    assert "\n" not in str(exit_info.value)


def test_a_fresh_start_returns_step_zero_and_sets_the_old_run_aside(tmp_path, capsys):
    run = training_run(tmp_path, seed=1, keep=2)
    for step in (1, 2, 3, 4):
        run.save(step, 1.0)
    assert (sorted(p.name for p in tmp_path.glob("*.pt"))
            == ["gpt_iter3_loss1.0000.pt", "gpt_iter4_loss1.0000.pt"])
    (tmp_path / "metrics.jsonl").write_text("{}\n")
    assert run.resume(shape_keys=("width",)) == 0
    assert "moved it to" in capsys.readouterr().out
    assert not list(tmp_path.glob("*.pt")) and len(list((tmp_path / "previous" / "1").iterdir())) == 3


# --- what a checkpoint knows of its data: it works after the clone moves, and checks what it finds ---------

def clone_with_data(root, tokenizer=TOKENIZER):
    """A repository folder holding a prepared-data folder with `tokenizer` in it."""
    data_dir = root / "data" / "project1" / "tiny"
    data_dir.mkdir(parents=True)
    tokenizer.save(data_dir)
    return data_dir


def test_a_checkpoint_records_its_data_relative_to_the_repository_and_finds_it_after_a_move(
        tmp_path, monkeypatch):
    monkeypatch.setattr(files, "REPO_ROOT", tmp_path / "old")
    record = data_record(clone_with_data(tmp_path / "old"), TOKENIZER)
    assert record["data_dir"] == "data/project1/tiny" and set(record["tokenizer_files"]) == {"tokenizer.json"}
    (tmp_path / "old").rename(tmp_path / "new")
    monkeypatch.setattr(files, "REPO_ROOT", tmp_path / "new")
    assert checkpoint_data_dir(record, load_tokenizer) == tmp_path / "new" / "data" / "project1" / "tiny"


def test_a_checkpoint_needs_no_data_folder_for_its_tokenizer(tmp_path, monkeypatch):
    monkeypatch.setattr(files, "REPO_ROOT", tmp_path / "old")
    record = data_record(clone_with_data(tmp_path / "old"), TOKENIZER)
    shutil.rmtree(tmp_path / "old")
    assert checkpoint_tokenizer(record, load_tokenizer).decode(TOKENIZER.encode("a cab")) == "a cab"
    config_ = {"CORPUS": "wiki-sample", "TOKENIZER": "char", "N_LAYER": 2}
    with pytest.raises(CourseError, match=r"not in this clone; prepare it with the chapter's "
                                          r"download_data.py --CORPUS=wiki-sample --TOKENIZER=char$"):
        checkpoint_data_dir({**record, "config": config_}, load_tokenizer)


def test_data_prepared_with_another_tokenizer_is_refused_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(files, "REPO_ROOT", tmp_path)
    record = data_record(clone_with_data(tmp_path), TOKENIZER)
    CharTokenizer(["<unk>"], list("xyz")).save(tmp_path / "data" / "project1" / "tiny")  # prepared again
    with pytest.raises(CourseError, match="prepared with another tokenizer than this model's") as stop:
        checkpoint_data_dir(record, load_tokenizer)
    assert "\n" not in str(stop.value)


def test_resume_latest_skips_a_corrupt_newest_checkpoint_and_says_why(tmp_path, capsys):
    run = training_run(tmp_path, seed=1)
    run.save(5, 2.0)
    corrupt = run.save(10, 1.5)
    corrupt.write_bytes(corrupt.read_bytes()[:100])  # a copy cut short
    assert training_run(tmp_path, seed=2, resume="latest").resume(shape_keys=("width",)) == 5
    out = capsys.readouterr().out
    assert f"skipped {corrupt}: not a readable checkpoint" in out and "resumed from" in out
    assert open_checkpoint("latest", tmp_path, "gpt", kind=KIND)[0].name == "gpt_iter5_loss2.0000.pt"


def test_when_no_checkpoint_loads_resume_ends_in_one_line(tmp_path):
    for step in (5, 10):
        training_run(tmp_path, seed=1).save(step, 1.0).write_bytes(b"not a checkpoint")
    with pytest.raises(CourseError, match=r"none of the 2 checkpoints in .* loads") as stop:
        training_run(tmp_path, seed=2, resume="latest").resume(shape_keys=("width",))
    assert "\n" not in str(stop.value)


def test_an_explicit_path_that_is_corrupt_is_not_replaced_by_another(tmp_path):
    run = training_run(tmp_path, seed=1)
    run.save(5, 2.0)
    corrupt = run.save(10, 1.5)
    corrupt.write_bytes(b"garbage")
    with pytest.raises(CourseError, match="not a readable checkpoint"):
        open_checkpoint(str(corrupt), tmp_path, "gpt", kind=KIND)
