"""Worker functions of test_gpu.py and bench/python/bench_gpu_tensor.py (spawn needs them importable):
device-side content and checksums for torch tensors."""
import math
import random
import traceback


def weighted_sum(t):
    """A position-sensitive checksum computed on the tensor's device (int64 arithmetic wraps alike)."""
    import torch
    flat = t.reshape(-1).view(torch.int64) if t.dtype == torch.int64 else t.reshape(-1).to(torch.int64)
    weights = torch.arange(1, flat.numel() + 1, device=flat.device, dtype=torch.int64)
    return int((flat * weights).sum().item())


def random_nbytes(rng, lo=1024, hi=64 << 20):
    """Log-uniform in [lo, hi]: every order of magnitude as often."""
    return int(math.exp(rng.uniform(math.log(lo), math.log(hi))))


def make_object(i, rng, device):
    """Message i: a dict with one or two int64 CUDA tensors of random contents and sizes, their
    device-side checksums, and ordinary Python data around them."""
    import torch
    n = max(1, random_nbytes(rng) // 8)
    gen = torch.Generator(device=device).manual_seed(i)
    t = torch.randint(-2**62, 2**62, (n,), dtype=torch.int64, device=device, generator=gen)
    obj = {"i": i, "t": t, "sum_t": weighted_sum(t), "note": "x" * (i % 50)}
    if i % 3 == 0:
        u = torch.randint(0, 100, (i % 1000 + 1, 4), dtype=torch.int64, device=device, generator=gen)
        obj["more"] = [u, ("cpu", i)]
        obj["sum_u"] = weighted_sum(u)
    return obj


def check_object(obj, i, device):
    problems = []
    if obj["i"] != i:
        problems.append(f"order: got {obj['i']}, expected {i}")
    t = obj["t"]
    if not t.is_cuda or t.device.index != device:
        problems.append(f"message {i}: tensor on {t.device}, expected cuda:{device}")
    if weighted_sum(t) != obj["sum_t"]:
        problems.append(f"message {i}: checksum of t differs ({t.numel() * 8} bytes)")
    if "more" in obj and weighted_sum(obj["more"][0]) != obj["sum_u"]:
        problems.append(f"message {i}: checksum of u differs")
    return problems


def gpu_reader(handle, rank, count, results, device=0):
    """Attaches `rank`, receives `count` objects on cuda:`device`, checks each; reports (rank, n, problems)."""
    try:
        import torch  # noqa: F401  (loaded before the first dequeue, as a real worker would)
        import ringcast
        q = ringcast.MessageQueue.create_from_handle(handle, rank)
        problems = []
        for i in range(count):
            obj = q.dequeue(timeout=120, device=device)
            problems += check_object(obj, i, device)
        results.put((rank, count, problems[:10]))
    except Exception:
        results.put((rank, -1, [traceback.format_exc()]))
