"""
The same training step natively, beside the WebGPU one (scripts/gpu-trip/run.sh): the
digits' MLP (784-128-10) and small CNN (conv 5x5x8, pool, conv 5x5x16, pool, dense), as
shared/tasks/mnist/models.ts builds them, at the bench's shares. A step is forward,
backward, the flat gradient read back to the host (what the all-reduce needs), and Adam:
what test/bench/gpu-step.ts times on WebGPU. Uniform noise in [0, 1] with random labels, as
there; median of 10 steps after 3 warm-up steps.

    python3 native_step.py [--out FILE] [--device cuda|cpu] [--steps 10]
"""
import argparse
import json
import statistics
import sys
import time

import torch
from torch import nn

SHARES = {"mlp": [32, 128, 512, 1024], "cnn": [32, 128, 512]}
WARM_STEPS = 3


def build(model):
    if model == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
    return nn.Sequential(
        nn.Conv2d(1, 8, 5), nn.ReLU(), nn.MaxPool2d(2, 2),
        nn.Conv2d(8, 16, 5), nn.ReLU(), nn.MaxPool2d(2, 2),
        nn.Flatten(), nn.Linear(16 * 4 * 4, 10),
    )


def time_steps(model_name, share, steps, device):
    model = build(model_name).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.001)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.rand(share, 1, 28, 28, device=device)
    y = torch.randint(0, 10, (share,), device=device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    times = []
    for s in range(WARM_STEPS + steps):
        sync()
        t0 = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        flat = torch.cat([p.grad.reshape(-1) for p in model.parameters()]).cpu()
        optimizer.step()
        sync()
        if s >= WARM_STEPS:
            times.append((time.perf_counter() - t0) * 1000)
    step_ms = statistics.median(times)
    return {"model": model_name, "share": share, "stepMs": step_ms, "examplesPerSec": share * 1000 / step_ms, "floats": flat.numel()}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    rows = []
    for model_name, shares in SHARES.items():
        for share in shares:
            row = time_steps(model_name, share, args.steps, args.device)
            rows.append(row)
            print(json.dumps(row), flush=True)
    report = {
        "generatedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "versions": {"python": sys.version.split()[0], "torch": torch.__version__, "cuda": torch.version.cuda},
        "device": torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu",
        "settings": {"timedSteps": args.steps, "warmSteps": WARM_STEPS, "optimizer": "Adam 0.001", "step": "forward, backward, flat gradient to the host, Adam"},
        "rows": rows,
    }
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()
