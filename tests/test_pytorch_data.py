"""nbaccel.utils.data (issue 24): datasets, samplers, collation and DataLoader, against
PyTorch's semantics (and torch.utils.data itself where the result does not depend on the
random stream)."""
import collections

import numpy as np
import pytest

import nbaccel as nb
from nbaccel.utils.data import (BatchSampler, ConcatDataset, DataLoader, Dataset,
                                IterableDataset, RandomSampler, SequentialSampler, Subset,
                                SubsetRandomSampler, TensorDataset, WeightedRandomSampler,
                                default_collate, get_worker_info, random_split)


class Squares(Dataset):
    def __init__(self, n=10):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return {"x": np.full(3, i, dtype=np.float32), "y": i * i, "w": float(i), "name": f"s{i}"}


def test_tensor_dataset_and_sequential_batches():
    x, y = nb.arange(20.0).reshape(10, 2), nb.arange(10)
    ds = TensorDataset(x, y)
    assert len(ds) == 10 and ds[3][1].item() == 3
    batches = list(DataLoader(ds, batch_size=4))
    assert [b[0].shape for b in batches] == [(4, 2), (4, 2), (2, 2)]
    assert [b[1].tolist() for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert len(DataLoader(ds, batch_size=4)) == 3 and len(DataLoader(ds, batch_size=4, drop_last=True)) == 2
    assert [b[1].tolist() for b in DataLoader(ds, batch_size=4, drop_last=True)][-1] == [4, 5, 6, 7]
    with pytest.raises(ValueError, match="Size mismatch"):
        TensorDataset(nb.ones(3), nb.ones(4))


def test_shuffle_is_a_permutation_and_reproducible_with_a_generator():
    ds = TensorDataset(nb.arange(50))
    run = lambda seed, **kw: [i for (b,) in DataLoader(ds, batch_size=8, shuffle=True,  # noqa: E731
                                                     generator=nb.Generator().manual_seed(seed), **kw)
                              for i in b.tolist()]
    a = run(0)
    assert sorted(a) == list(range(50)) and a != list(range(50))
    assert run(0) == a and run(1) != a
    assert run(0, num_workers=2) == a           # threads keep the sampler's order
    nb.manual_seed(3)
    b = [i for (t,) in DataLoader(ds, batch_size=50, shuffle=True) for i in t.tolist()]
    nb.manual_seed(3)
    assert [i for (t,) in DataLoader(ds, batch_size=50, shuffle=True) for i in t.tolist()] == b


def test_default_collate_matches_torch():
    batch = [Squares()[i] for i in range(3)]
    out = default_collate(batch)
    assert out["x"].shape == (3, 3) and out["x"].dtype is nb.float32
    assert out["y"].dtype is nb.int64 and out["y"].tolist() == [0, 1, 4]
    assert out["w"].dtype is nb.float64 and out["name"] == ["s0", "s1", "s2"]
    P = collections.namedtuple("P", "a b")
    nt = default_collate([P(nb.ones(2), 1), P(nb.zeros(2), 2)])
    assert isinstance(nt, P) and nt.a.shape == (2, 2) and nt.b.tolist() == [1, 2]
    pytest.importorskip("torch")
    from torch.utils.data import default_collate as tcollate
    t = tcollate(batch)
    for k in ("x", "y", "w"):
        np.testing.assert_array_equal(out[k].numpy(), t[k].numpy())
        assert str(out[k].dtype) == str(t[k].dtype).replace("torch.", "")
    assert t["name"] == out["name"]


def test_loader_over_python_dataset_with_workers_and_batch_size_none():
    ds = Squares(7)
    seen = []

    def init(wid):
        seen.append(get_worker_info().id)

    got = list(DataLoader(ds, batch_size=3, num_workers=2, worker_init_fn=init))
    assert [b["y"].tolist() for b in got] == [[0, 1, 4], [9, 16, 25], [36]]
    # (the pool starts a second thread only when the first is busy: one or both ran)
    assert set(seen) in ({0}, {0, 1}) and len(seen) == len(set(seen)) and get_worker_info() is None
    one = list(DataLoader(ds, batch_size=None))
    assert len(one) == 7 and isinstance(one[2]["x"], nb.Tensor) and one[2]["y"] == 4
    loader = DataLoader(ds, batch_size=2, num_workers=2, persistent_workers=True)
    assert [len(b["y"]) for b in loader] == [2, 2, 2, 1] == [len(b["y"]) for b in loader]


def test_samplers():
    data = list(range(10))
    assert list(SequentialSampler(data)) == data
    g = nb.Generator().manual_seed(0)
    perm = list(RandomSampler(data, generator=g))
    assert sorted(perm) == data
    r = list(RandomSampler(data, replacement=True, num_samples=25, generator=g))
    assert len(r) == 25 and all(0 <= i < 10 for i in r)
    assert sorted(list(RandomSampler(data, num_samples=15, generator=g))[:10]) == data
    assert sorted(SubsetRandomSampler([2, 4, 6], generator=g)) == [2, 4, 6]
    assert list(BatchSampler(SequentialSampler(data), 4, False)) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert len(BatchSampler(range(10), 4, True)) == 2
    w = list(WeightedRandomSampler([0.0, 1.0, 0.0], 5, generator=g))
    assert w == [1] * 5
    loader = DataLoader(data, batch_sampler=BatchSampler(SequentialSampler(data), 5, False))
    assert [b.tolist() for b in loader] == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]
    with pytest.raises(ValueError):
        DataLoader(data, sampler=SequentialSampler(data), shuffle=True)
    with pytest.raises(ValueError):
        BatchSampler(range(3), 0, False)


def test_subset_random_split_concat():
    ds = TensorDataset(nb.arange(10))
    a, b = random_split(ds, [7, 3], generator=nb.Generator().manual_seed(0))
    ids = sorted([int(a[i][0]) for i in range(7)] + [int(b[i][0]) for i in range(3)])
    assert ids == list(range(10))
    parts = random_split(range(11), [0.5, 0.3, 0.2], generator=nb.Generator().manual_seed(1))
    assert [len(p) for p in parts] == [6, 3, 2]          # PyTorch: floor, then round-robin
    with pytest.raises(ValueError):
        random_split(range(5), [2, 2])
    sub = Subset(ds, [9, 0, 5])
    assert [b[0].tolist() for b in DataLoader(sub, batch_size=3)] == [[9, 0, 5]]
    cat = ds + TensorDataset(nb.arange(100, 103))
    assert isinstance(cat, ConcatDataset) and len(cat) == 13 and cat[11][0].item() == 101
    assert cat[-1][0].item() == 102
    torch = pytest.importorskip("torch")
    tparts = torch.utils.data.random_split(range(11), [0.5, 0.3, 0.2])
    assert [len(p) for p in tparts] == [len(p) for p in parts]


def test_iterable_dataset():
    class Stream(IterableDataset):
        def __iter__(self):
            return iter(np.arange(5, dtype=np.int64))

    assert [b.tolist() for b in DataLoader(Stream(), batch_size=2)] == [[0, 1], [2, 3], [4]]
    with pytest.raises(ValueError, match="shuffle"):
        DataLoader(Stream(), shuffle=True)


def test_training_loop_over_a_loader_compiles():
    nb.manual_seed(0)
    x = nb.randn(64, 4)
    y = (x.sum(1, keepdim=True) > 0).float()
    model = nb.nn.Linear(4, 1)
    opt = nb.optim.SGD(model.parameters(), lr=0.5)

    @nb.compile
    def step(xb, yb):
        opt.zero_grad()
        loss = nb.nn.functional.binary_cross_entropy_with_logits(model(xb), yb)
        loss.backward()
        opt.step()
        return loss

    losses = [step(xb, yb).item() for _ in range(5)
              for xb, yb in DataLoader(TensorDataset(x, y), batch_size=16, drop_last=True)]
    assert losses[-1] < losses[0]
