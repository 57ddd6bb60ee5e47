"""Training step time and peak memory of transformers models with "hipdnn" against "sdpa".

Run on a GPU machine (``python benchmarks/torch_training.py [--quick] [--json OUT]
[--precisions fp32,fp32-autocast-bf16,bf16]``). Each configuration is trained in each precision
of ``--precisions``: ``fp32`` (float32 weights and activations: transformers' default dtype),
``fp32-autocast-bf16`` (float32 weights under ``torch.autocast("cuda", torch.bfloat16)``, the
standard mixed precision, what ``Trainer(bf16=True)`` runs) and ``bf16`` (bf16 weights and
activations); AdamW, random tokens, no download. The configurations:

* ``gpt2-default``: GPT-2 small in transformers' DEFAULT configuration (12 layers, hidden 768,
  12 heads, head dim 64, MHA), so attention, residual and embedding dropout are 0.1: what a
  user who trains GPT-2 runs;
* ``llama-small``: a small Llama with grouped-query attention (8 layers, hidden 1024, 16 heads,
  4 KV heads, head dim 64, SwiGLU 2816), whose small kernels expose host time;
* ``gpt2-small``: GPT-2 small sized as above with dropout off;
* ``llama-gqa``: Llama style with grouped-query attention (8 layers, hidden 2048, 32 heads,
  8 KV heads, head dim 64, SwiGLU 5632), dropout off;

at sequence 1k and 4k with 16k tokens per step, it trains one model per attention
implementation from the same seed and prints the median step time (forward, backward and
optimizer step, timed with CUDA events after warm-up), the ratio hipdnn / sdpa (target ≤ 1.03),
the peak memory of each (``torch.cuda.max_memory_allocated`` over the timed steps; target: no
more than sdpa), the first step's loss of each (equal up to bf16 noise), and the engines the
hipdnn graphs ran on. Rounds alternate the two implementations (sdpa, hipdnn, sdpa, hipdnn, …)
so that clock or thermal drift hits both alike; each figure is the median over rounds.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
import transformers

import hipdnn_graph.torch as hgt

TOKENS = 16 * 1024
IMPLS = ("sdpa", "hipdnn")


#: precision name -> (weights' dtype, autocast dtype or None)
PRECISIONS: dict[str, tuple[torch.dtype, torch.dtype | None]] = {
    "fp32": (torch.float32, None),
    "fp32-autocast-bf16": (torch.float32, torch.bfloat16),
    "bf16": (torch.bfloat16, None),
}


@dataclass
class Row:
    model: str
    seq: int
    batch: int
    precision: str = "bf16"
    sdpa_ms: float = 0.0
    hipdnn_ms: float = 0.0
    ratio: float = 0.0
    sdpa_peak_gib: float = 0.0
    hipdnn_peak_gib: float = 0.0
    sdpa_loss: float = 0.0
    hipdnn_loss: float = 0.0
    engines: list[str] = field(default_factory=list)


def config(name: str, seq: int) -> Any:
    if name == "gpt2-default":  # transformers' defaults: GPT-2 small, dropout 0.1 everywhere
        return transformers.GPT2Config(n_positions=seq)
    if name == "llama-small":
        return transformers.LlamaConfig(
            num_hidden_layers=8, hidden_size=1024, num_attention_heads=16,
            num_key_value_heads=4, intermediate_size=2816, vocab_size=32000,
            max_position_embeddings=seq,
        )  # fmt: skip
    if name == "gpt2-small":
        return transformers.GPT2Config(
            n_layer=12, n_embd=768, n_head=12, n_positions=seq, vocab_size=50257,
            attn_pdrop=0.0, resid_pdrop=0.0, embd_pdrop=0.0,
        )  # fmt: skip
    if name == "llama-gqa":
        return transformers.LlamaConfig(
            num_hidden_layers=8, hidden_size=2048, num_attention_heads=32,
            num_key_value_heads=8, intermediate_size=5632, vocab_size=32000,
            max_position_embeddings=seq, attention_dropout=0.0,
        )  # fmt: skip
    raise ValueError(name)


class Trainer:
    """One model, its optimizer and a fixed batch on the GPU."""

    def __init__(
        self, name: str, seq: int, batch: int, impl: str, device: str, precision: str = "bf16"
    ) -> None:
        torch.manual_seed(0)
        dtype, self.autocast = PRECISIONS[precision]
        self.device_type = device.split(":")[0]
        with torch.device(device):  # initialised where it trains (fast on a GPU)
            self.model = transformers.AutoModelForCausalLM.from_config(
                config(name, seq), attn_implementation=impl, dtype=dtype
            )
        self.model.train()
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-4, foreach=True)
        g = torch.Generator().manual_seed(1)
        vocab = self.model.config.vocab_size
        self.ids = torch.randint(0, vocab, (batch, seq), generator=g).to(device)

    def step(self) -> torch.Tensor:
        if self.autocast is None:
            loss = self.model(input_ids=self.ids, labels=self.ids).loss
        else:
            with torch.autocast(self.device_type, dtype=self.autocast):
                loss = self.model(input_ids=self.ids, labels=self.ids).loss
        loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        return loss.detach()


def measure(trainer: Trainer, steps: int) -> float:
    """Median milliseconds of one training step."""
    times = []
    if not torch.cuda.is_available():  # a smoke run of the script on a CPU
        for _ in range(steps):
            start_s = time.perf_counter()
            trainer.step()
            times.append((time.perf_counter() - start_s) * 1e3)
        return statistics.median(times)
    for _ in range(steps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        trainer.step()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def run_config(
    name: str, seq: int, rounds: int, steps: int, warmup: int, tokens: int, device: str,
    precision: str = "bf16",
) -> Row:  # fmt: skip
    batch = max(1, tokens // seq)
    cuda = device.startswith("cuda")
    row = Row(name, seq, batch, precision)
    times: dict[str, list[float]] = {impl: [] for impl in IMPLS}
    peaks: dict[str, float] = dict.fromkeys(IMPLS, 0.0)
    for r in range(rounds):
        for impl in IMPLS:
            gc.collect()
            if cuda:
                torch.cuda.empty_cache()
            hgt.graph_cache().clear()
            trainer = Trainer(name, seq, batch, impl, device, precision)
            first = float(trainer.step())  # the same seed, weights and batch for both
            if r == 0:
                setattr(row, f"{impl}_loss", first)
            for _ in range(warmup):
                trainer.step()
            if cuda:
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
            times[impl].append(measure(trainer, steps))
            if cuda:
                peaks[impl] = max(peaks[impl], torch.cuda.max_memory_allocated() / 2**30)
            if impl == "hipdnn":
                row.engines = sorted(
                    {entry.graph.get_plan_name() for entry in hgt.graph_cache().values()}
                )
            del trainer
    row.sdpa_ms = statistics.median(times["sdpa"])
    row.hipdnn_ms = statistics.median(times["hipdnn"])
    row.ratio = row.hipdnn_ms / row.sdpa_ms
    row.sdpa_peak_gib, row.hipdnn_peak_gib = peaks["sdpa"], peaks["hipdnn"]
    return row


def _print_row(row: Row) -> None:
    print(f"| {row.model} | {row.precision} | {row.seq} | {row.batch} | {row.sdpa_ms:.1f} | "
          f"{row.hipdnn_ms:.1f} | {row.ratio:.3f} | {row.sdpa_peak_gib:.2f} | "
          f"{row.hipdnn_peak_gib:.2f} | {row.sdpa_loss:.4f} / {row.hipdnn_loss:.4f} | "
          f"{', '.join(row.engines)} |", flush=True)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one round, fewer steps")
    parser.add_argument("--json", help="also write the rows as JSON to this path")
    parser.add_argument("--models", default="gpt2-default,llama-small,gpt2-small,llama-gqa")
    parser.add_argument("--seqs", default="1024,4096")
    parser.add_argument("--tokens", type=int, default=TOKENS, help="tokens per step")
    parser.add_argument("--precisions", default=",".join(PRECISIONS), help="see the module")
    parser.add_argument(
        "--cpu-smoke",
        action="store_true",
        help="run on the CPU (checks the script; its figures mean nothing)",
    )
    args = parser.parse_args(argv)
    if not torch.cuda.is_available() and not args.cpu_smoke:
        print("needs a CUDA or ROCm device (or --cpu-smoke)", file=sys.stderr)
        return 1
    hgt.register_transformers()
    rounds, steps, warmup = (1, 5, 2) if args.quick else (3, 10, 3)
    where = "cpu" if args.cpu_smoke else "cuda"
    device = "CPU (smoke run)" if args.cpu_smoke else torch.cuda.get_device_name()
    print(f"# {device}, torch {torch.__version__}, transformers {transformers.__version__}, "
          f"Python {platform.python_version()}; AdamW, {args.tokens} tokens/step, "
          f"{rounds} round(s) x {steps} steps")  # fmt: skip
    header = ("| model | precision | seq | batch | sdpa ms | hipdnn ms | ratio | sdpa peak GiB | "
              "hipdnn peak GiB | first loss sdpa / hipdnn | hipdnn engines |")  # fmt: skip
    print(header)
    print("|" + "---|" * 11)
    rows = []
    for name in args.models.split(","):
        for precision in args.precisions.split(","):
            for seq in (int(s) for s in args.seqs.split(",")):
                row = run_config(name, seq, rounds, steps, warmup, args.tokens, where, precision)
                rows.append(row)
                _print_row(row)
    if args.json:
        meta = {"device": device, "torch": torch.__version__,
                "transformers": transformers.__version__, "quick": args.quick,
                "tokens_per_step": args.tokens, "rounds": rounds, "steps": steps}  # fmt: skip
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "rows": [asdict(r) for r in rows]}, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
