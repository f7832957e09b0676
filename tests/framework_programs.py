"""Small programs run through frameworks nobody here wrote, shared by
``tests/test_frameworks.py`` and ``benchmarks/frameworks.py``."""

from __future__ import annotations

from typing import Any

import torch

#: the tiny language models' vocabulary
VOCAB = 64


class Tokens(torch.utils.data.Dataset):
    """8 seeded sequences of 8 tokens, each its own label (a causal LM's training data)."""

    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        ids = torch.randint(0, VOCAB, (8,), generator=torch.Generator().manual_seed(i))
        return {"input_ids": ids, "labels": ids.clone()}


def lightning_regression() -> tuple[Any, torch.utils.data.DataLoader, Any]:
    """A Lightning module, its loader (10 rows in batches of 4, 4 and 2: a dynamic
    recompile on the last) and a CPU ``Trainer`` for 2 epochs, nothing logged or saved."""
    import lightning

    class Net(lightning.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.layer(x)

        def training_step(self, batch: list[torch.Tensor], _: int) -> torch.Tensor:
            x, y = batch
            return torch.nn.functional.mse_loss(self(x), y)

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    x = torch.randn(10, 8, generator=torch.Generator().manual_seed(0))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True)), batch_size=4)
    trainer = lightning.Trainer(max_epochs=2, accelerator="cpu", logger=False, enable_checkpointing=False,
                                enable_progress_bar=False, enable_model_summary=False)
    return Net(), loader, trainer
