"""verishape inside a framework nobody here wrote: Hugging Face ``Trainer`` compiling a tiny
GPT-2's training step (forward and backward) with ``torch_compile=True``.

accelerate vets the backend's name, so the way in is the process-wide switch
(``verishape.enable()``, or ``VERISHAPE_ENABLE=1`` for launchers); the frames Trainer compiles
reason with VeriShapeEnv and train to the loss eager training reaches (within Inductor's rounding)."""

from __future__ import annotations

import contextlib
import tempfile
import warnings

import pytest
import torch

import verishape
from verishape.compiler import frames
from verishape.shape_env import VeriShapeEnv

transformers = pytest.importorskip("transformers")  # the dev set-up installs it: CI runs this
pytest.importorskip("accelerate")  # Trainer's dependency, installed by the dev set-up

pytestmark = pytest.mark.slow

VOCAB = 64


class _Tokens(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        ids = torch.randint(0, VOCAB, (8,), generator=torch.Generator().manual_seed(i))
        return {"input_ids": ids, "labels": ids.clone()}


def _train(compile_: bool, backend_name: str | None = None) -> tuple[float, torch.nn.Module]:
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=VOCAB, n_positions=16))
    with tempfile.TemporaryDirectory() as out, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kwargs = {"torch_compile_backend": backend_name} if backend_name else {}
        args = TrainingArguments(output_dir=out, max_steps=2, per_device_train_batch_size=2, report_to=[],
                                 use_cpu=True, save_strategy="no", dataloader_num_workers=0, seed=0,
                                 torch_compile=compile_, disable_tqdm=True, **kwargs)
        trainer = Trainer(model=model, args=args, train_dataset=_Tokens())
        return trainer.train().training_loss, model


def test_trainer_compiles_its_training_step_with_verishape_under_the_switch():
    torch._dynamo.reset()
    want, _ = _train(compile_=False)
    with verishape.enable():
        got, model = _train(compile_=True)
    torch._dynamo.reset()
    envs = frames.envs_for(type(model).forward.__code__)
    assert envs and all(isinstance(e, VeriShapeEnv) for e in envs)
    # Inductor's fused kernels round differently from eager's over two optimizer steps
    # (measured: 3.65110 vs 3.65148); a wrong shape decision fails loudly or far off.
    assert got == pytest.approx(want, rel=1e-3)


def test_accelerate_refuses_the_backend_name_so_the_switch_is_the_way_in():
    """What a user meets handing Trainer the name: accelerate checks it against its own
    enum of backends before training starts (accelerate 1.15)."""
    with pytest.raises(ValueError, match="'VERISHAPE' is not a valid DynamoBackend"), contextlib.ExitStack():
        _train(compile_=True, backend_name="verishape")
