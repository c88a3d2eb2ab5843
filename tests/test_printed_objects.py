"""Objects a tutorial prints read as a summary, not a raw dict of 15-digit floats (issue 37,
item 8): DataParallel.report() (text and HTML) and the Dask cluster's status."""
import re

import pytest

from nbaccel.distributed.data_parallel import TrainingReport

RAW = {"workers": ["tcp://127.0.0.1:39779", "tcp://127.0.0.1:45265"], "steps": 150, "resumed": [],
       "compiled_step": [{"compiles": 2, "cache_hits": 148, "eager_fallbacks": 0}] * 2,
       "steps_per_s": 6.396497123080514, "samples_per_s": 1637.5032635086116,
       "compute_s": 6.809638389000611, "communication_s": 16.484360987996297,
       "communication_share": 0.7076655546009327}


def test_the_training_report_is_a_dict_that_prints_readably():
    r = TrainingReport(RAW)
    assert r == RAW and r["steps_per_s"] == RAW["steps_per_s"]          # the API is the dict
    text = repr(r)
    assert not re.search(r"\d\.\d{5,}", text), text                     # no 15-digit floats
    for part in ("2: tcp://127.0.0.1:39779, tcp://127.0.0.1:45265", "6.4 steps/s", "1,638 samples/s",
                 "compute 6.81 s", "communication 16.5 s (71% of a step)", "4 compile(s), 296 cache hits"):
        assert part in text, (part, text)
    html = r._repr_html_()
    assert "<table>" in html and "1,638 samples/s" in html and not re.search(r"\d\.\d{5,}", html)
    from IPython.lib.pretty import pretty
    assert pretty(r) == text                                             # what a notebook cell shows


def test_an_eager_step_and_a_resumed_run_are_said_so():
    r = TrainingReport(dict(RAW, compiled_step=[None, None], resumed=[40]))
    assert "resumed at 40" in repr(r) and "none: the step runs eagerly" in repr(r)


class _Client:
    class scheduler:
        address = "tcp://127.0.0.1:8786"
    dashboard_link = "http://127.0.0.1:8787/status"

    def scheduler_info(self):
        return {"workers": {"tcp://127.0.0.1:2": {"nthreads": 2, "memory_limit": 2 * 2**30},
                            "tcp://127.0.0.1:1": {"nthreads": 1, "memory_limit": 0}}}


def test_the_cluster_status_reads_as_text_and_as_a_table():
    from nbaccel.daskbridge import cluster
    st = cluster.status(_Client())
    assert repr(st) == ("Dask cluster at tcp://127.0.0.1:8786: 2 workers, 3 threads; "
                        "dashboard http://127.0.0.1:8787/status")
    assert cluster.describe(_Client()) == repr(st)
    html = st._repr_html_()
    assert html.index("tcp://127.0.0.1:1") < html.index("tcp://127.0.0.1:2")      # sorted
    assert "2.0 GiB" in html and "none" in html and html.count("<tr>") == 3
