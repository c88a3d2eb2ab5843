"""bench/sparse.py runs and reports (tiny sizes: the real measurement is `python -m bench.sparse`)."""
from bench import sparse


def test_bench_cases_check_results_and_report_bytes():
    cases = [sparse._case("gemv8", 2, 64, None, 2, pause=0),
             sparse._case("gemm64", 1, 64, 8, 2, pause=0)]
    for c in cases:
        assert c["weight_bytes"]["sparse"] < 0.6 * c["weight_bytes"]["dense"]
        assert c["seconds"]["dense"]["runs"] == 2 and c["speedup"]["median"] > 0
    text = sparse.markdown({"quick": True, "targets": {"gemv8": 1.5, "gemm64": 1.1}, "cases": cases,
                            "machine": {"numba_threads": 2, "env": {}}})
    assert "gemv8: 2 × 64×64, batch 1" in text and "gemm64: 1 × 64×64, batch 8" in text
