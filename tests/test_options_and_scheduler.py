"""Option parsing and the one-worker scheduler (plain unit tests)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from dgemma_lsp.runtime.options import Options, completion_budget_ms, parse_options
from dgemma_lsp.runtime.scheduler import Scheduler, Superseded


def test_camel_case_options_under_a_dgemma_key():
    options, problems = parse_options({"dgemma": {"model": "/m", "completion": {"latencyBudgetMs": 80}}})
    assert problems == []
    assert options.model == "/m" and options.completion.latency_budget_ms == 80
    assert options.context == Options().context


def test_the_latency_budget_follows_the_device_unless_set():
    unset = Options().completion
    assert completion_budget_ms(unset, "cpu") == 250
    assert completion_budget_ms(unset, "cuda:0") == completion_budget_ms(unset, "mps") == 150
    options, _ = parse_options({"completion": {"latencyBudgetMs": 0}})
    assert completion_budget_ms(options.completion, "cuda") == 0  # 0: no deadline, on any device
    options, problems = parse_options({"completion": {"latencyBudgetMs": -5}})
    assert options.completion.latency_budget_ms is None and "latencyBudgetMs" in problems[0]


def test_bad_options_are_reported_and_defaults_kept():
    options, problems = parse_options(
        {"device": "gpu9", "threads": -2, "completion": {"candidates": 0, "bogus": 1}, "context": 3}
    )
    assert options == Options()
    assert len(problems) == 5
    assert any("bogus" in p for p in problems) and any("device" in p for p in problems)


def test_options_that_are_not_an_object():
    options, problems = parse_options(["model"])
    assert options == Options() and problems


async def test_a_newer_job_supersedes_the_pending_one_for_the_same_document():
    scheduler = Scheduler()
    gate = threading.Event()
    try:
        running = scheduler.submit("a", lambda cancel: gate.wait(5) and "first")
        await asyncio.sleep(0.05)  # let the worker start it
        pending = scheduler.submit("b", lambda cancel: "b1")
        newest = scheduler.submit("b", lambda cancel: "b2")
        gate.set()
        assert await running == "first"
        with pytest.raises(Superseded):
            await pending
        assert await newest == "b2"
    finally:
        scheduler.stop()


async def test_a_running_job_is_cancelled_by_a_newer_one_and_the_worker_is_freed():
    scheduler = Scheduler()
    started = threading.Event()

    def long_job(cancel: threading.Event) -> str:
        started.set()
        cancel.wait(10)  # an engine checks this flag between denoising steps
        return "late"

    try:
        old = scheduler.submit("doc", long_job)
        await asyncio.get_running_loop().run_in_executor(None, started.wait, 5)
        new = scheduler.submit("doc", lambda cancel: "fresh")
        with pytest.raises(Superseded):
            await asyncio.wait_for(old, 2)
        assert await asyncio.wait_for(new, 2) == "fresh"
        assert scheduler.superseded == 1
    finally:
        scheduler.stop()


async def test_a_failing_job_reports_its_error_and_the_worker_goes_on():
    scheduler = Scheduler()
    try:
        failing = scheduler.submit("x", lambda cancel: 1 / 0)
        with pytest.raises(ZeroDivisionError):
            await failing
        assert await scheduler.submit("x", lambda cancel: "ok") == "ok"
    finally:
        scheduler.stop()
