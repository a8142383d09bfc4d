"""dgemma-lsp against a real vLLM serving DiffusionGemma (a tiny random-weight model: mechanics, not
quality): the commands, the engine's diffusion pipeline over the wire, and the language server over
stdio with vLLM behind it, down to the server going away and coming back.

vLLM comes from scripts/install-vllm.sh's cached environment (built here when missing); without it
these tests skip and say why. Random weights write noise, so the tests check what must hold whatever
the model writes: what reached the server, what came back pinned, what the status says.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from lsprotocol import types

from engine import CancelFlag, EngineError, InfillRequest, RemoteSettings, load_engine
from engine import remote_engine as remote_module
from engine.api import CanvasStep
from evaluation import gpu_bench
from tests.lsp_session import inline, lsp_session, open_document, wait_until
from tests.vllm_server import API_KEY, CANVAS, SERVED_NAME, VllmServer, build_checkpoint, ensure_vllm

pytestmark = pytest.mark.vllm

SOURCE = "def mean(values):\n    return sum(values) / len(values)\n\n\ndef variance(values):\n    m = \n"
URI = "file:///work/stats.py"
NO_DEADLINE = {"completion": {"latencyBudgetMs": 0}, "rewrite": {"latencyBudgetMs": 0}}
REQUESTS = "vllm:request_success_total"  # sequences: a request with n=2 counts 2
HTTP = "http_requests_total"
STEPS = "vllm:diffusion_num_denoising_steps_total"
GENERATED = "vllm:generation_tokens_total"
CONTROLS = ("diffusion_seed_canvas", "diffusion_pinned", "diffusion_max_steps", "diffusion_canvas_length",
            "diffusion_read_only")  # fmt: skip


@pytest.fixture(scope="module")
def vllm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    launcher, why = ensure_vllm()
    if launcher is None:
        pytest.skip(f"no vLLM: {why}")
    folder = tmp_path_factory.mktemp("vllm")
    server = VllmServer(launcher, build_checkpoint(folder / "tiny"), folder / "vllm.log")
    try:
        server.start()
        server.warm_up()
    except RuntimeError as err:
        server.stop()
        pytest.fail(f"vLLM is installed but does not serve: {err}")
    yield server
    server.stop()


@pytest.fixture
def keyed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The server's API key in the environment, as a user sets it (the language server inherits it)."""
    monkeypatch.setenv("DGEMMA_API_KEY", API_KEY)


@pytest.fixture(scope="module")
def engine(vllm: VllmServer):
    """One engine for the module (the tests that restart the server make engines of their own)."""
    made = load_engine(vllm.url, remote=RemoteSettings(api_key=API_KEY, timeout_s=300))
    yield made
    made.close()


def doctor(url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dgemma_lsp", "doctor", "--model", url], capture_output=True, text=True
    )


def test_doctor_tells_what_the_server_serves_and_which_extras_it_takes(vllm, keyed):
    done = doctor(vllm.url)
    assert done.returncode == 0, done.stderr
    for said in (SERVED_NAME, "vLLM 0.32.0", "fim (its tokenizer has <|fim_middle|>", f"canvas {CANVAS}"):
        assert said in done.stdout, done.stdout
    for control in CONTROLS:  # each tested by a value the server refuses, naming it
        assert f"{control:<24} checked: taken" in done.stdout, done.stdout
    assert API_KEY not in done.stdout + done.stderr


def test_doctor_says_what_is_wrong_with_a_key_or_a_path_and_exits_1(vllm, monkeypatch):
    monkeypatch.delenv("DGEMMA_API_KEY", raising=False)
    unkeyed = doctor(vllm.url)
    assert unkeyed.returncode == 1 and "UNAUTHORIZED" in unkeyed.stdout, unkeyed.stdout
    assert "check DGEMMA_API_KEY" in unkeyed.stdout and "set DGEMMA_API_KEY" in unkeyed.stdout
    monkeypatch.setenv("DGEMMA_API_KEY", API_KEY)
    wrong_path = doctor(vllm.url.removesuffix("/v1") + "/openai/v1")
    assert wrong_path.returncode == 1 and "NOT FOUND" in wrong_path.stdout, wrong_path.stdout
    assert "check the URL's path" in wrong_path.stdout


def test_complete_prints_a_completion_and_a_wrong_key_in_one_line(vllm, keyed):
    demo = str(Path(__file__).resolve().parent.parent / "fixtures" / "demo" / "stats.py")
    command = [sys.executable, "-m", "dgemma_lsp", "complete", demo, "--line", "10",
               "--col", "12", "--model", vllm.url, "--budget-ms", "0", "--json"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and '"device": "remote"' in done.stdout, done.stderr
    answer = json.loads(done.stdout)
    assert answer["steps"] is None and answer["tokens_per_forward"] is None  # vLLM does not say: unknown
    assert set(answer["route"].split("+")) <= {"seeded", "plain"} and answer["requests"] >= 1
    assert answer["network_ms"] > 0 and answer["engine_ms"] < answer["network_ms"]  # its own work apart
    wrong = {**os.environ, "DGEMMA_API_KEY": "wrong"}
    refused = subprocess.run(command, capture_output=True, text=True, timeout=600, env=wrong)
    assert refused.returncode == 1 and "HTTP 401" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1 and "Traceback" not in refused.stderr


def test_drafts_and_noise_rows_each_reach_the_server_and_compete(vllm, engine):
    before = vllm.metric(HTTP, handler="/v1/completions"), vllm.metric(REQUESTS)
    request = InfillRequest(
        prefix="def f(x):\n    return ", suffix="\n", language="python", drafts=("x + 1", "x * 2"),
        n_candidates=4, max_new_tokens=CANVAS,
    )  # fmt: skip
    result = engine.infill(request)
    # A request per draft, one (n=2) for the noise rows: four sequences.
    assert vllm.metric(HTTP, handler="/v1/completions") - before[0] == 3
    assert vllm.metric(REQUESTS) - before[1] == 4
    assert result.candidates and any(c.text for c in result.candidates)
    assert {c.draft for c in result.candidates} <= {0, 1, None}
    means = [c.mean_confidence for c in result.candidates]
    assert means == sorted(means, reverse=True) and all(0 < m <= 1 for m in means if m)


def test_the_seeded_draft_is_shown_to_an_observer_before_the_server_answers(vllm, engine):
    shown: list[tuple[CanvasStep, int]] = []  # each step, and how many requests the server had finished then

    class Observer:
        def due(self) -> bool:
            return True

        def __call__(self, step: CanvasStep) -> None:
            shown.append((step, vllm.metric(REQUESTS)))

    before = vllm.metric(REQUESTS)
    request = InfillRequest(
        prefix="def f(x):\n    return ", suffix="\n", language="python", drafts=("x + 1",),
        max_new_tokens=CANVAS, observer=Observer(),
    )  # fmt: skip
    engine.infill(request)
    assert [(s.step, s.text, s.settled, s.draft) for s, _ in shown] == [(0, "x + 1", (), 0)]
    assert shown[0][1] == before  # shown before the server had answered


def test_vllm_holds_pinned_positions_and_the_engine_returns_them_as_sent(vllm, engine, monkeypatch):
    """What vLLM answered at pinned positions, read before the engine puts the seed back there: far more
    of them as seeded than the same positions left free (vLLM answers its argmax at a pinned position,
    docs/team-server.md); and what the engine returns, every pinned position as sent."""
    answered: list[tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]] = []
    real = remote_module.candidate

    def spy(out, row, canvas, facts, pinned):
        answered.append((out.token_ids, row.seed, row.pinned))
        return real(out, row, canvas, facts, pinned)

    monkeypatch.setattr(remote_module, "candidate", spy)
    seed = "values = sorted(values)\n"
    ids = vllm.tokenize(seed)
    fixed = tuple(range(0, len(ids), 2))
    detokenized = vllm.metric(HTTP, handler="/detokenize")
    results = []
    for attempt, pins in enumerate([fixed] * 3 + [()] * 3):
        request = InfillRequest(prefix="def f(values):\n    ", suffix="\n", seed_canvas=seed,
                                fixed_positions=pins, seed_noise=0.0, seed=attempt)  # fmt: skip
        results.append(engine.infill(request))
    assert vllm.metric(HTTP, handler="/detokenize") - detokenized == 1  # the seed's texts: one call
    kept = {True: [0, 0], False: [0, 0]}  # pinned or not: (as seeded, answered)
    for out, start, pinned in answered:
        for p in fixed:
            if p < len(out):
                kept[bool(pinned)][0] += out[p] == start[p]
                kept[bool(pinned)][1] += 1
    pinned_share, free_share = (kept[k][0] / kept[k][1] for k in (True, False))
    print(f"vLLM answered {pinned_share:.0%} of pinned positions as seeded ({free_share:.0%} unpinned)")
    assert kept[True][1] and pinned_share >= 0.2 and pinned_share > free_share + 0.15
    for result in results[:3]:
        for found in result.candidates:
            held = [found.token_ids[p] for p in fixed if p < len(found.token_ids)]
            assert held == [ids[p] for p in fixed][: len(held)]


def test_a_canvas_capped_at_one_step_takes_one_step(vllm, engine):
    request = InfillRequest(prefix="x = ", seed_canvas="len(values)", max_steps=1)
    before = vllm.metric(STEPS)
    engine.infill(request)
    assert vllm.metric(STEPS) - before == 1


def test_a_superseded_request_is_abandoned_and_costs_the_server_nothing_further(vllm, engine):
    cancel = CancelFlag()
    long = InfillRequest(prefix="def f(x):\n", max_new_tokens=CANVAS * 12, cancel=cancel)
    threading.Timer(1.0, cancel.set).start()
    started = time.monotonic()
    assert engine.infill(long).stop_reason == "cancelled"
    assert time.monotonic() - started < 60  # a generous guard: twelve canvases take far longer here
    deadline = time.monotonic() + 60
    while vllm.metric("vllm:num_requests_running") > 0 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert vllm.metric("vllm:num_requests_running") == 0
    steps = vllm.metric(STEPS)
    time.sleep(2.0)
    assert vllm.metric(STEPS) == steps  # nothing denoises for it any more


def test_the_chat_family_can_be_forced_on_the_same_server(vllm, keyed):
    chat = load_engine(vllm.url, remote=RemoteSettings(family="gemma4-chat", timeout_s=300))
    try:
        before = vllm.metric(REQUESTS)
        result = chat.infill(InfillRequest(prefix="x = ", suffix="\n", max_new_tokens=CANVAS))
        assert chat.info.family == "gemma4-chat" and result.stop_reason in ("eos", "max_tokens")
        assert vllm.metric(REQUESTS) - before == 1
    finally:
        chat.close()


def test_an_unknown_key_is_refused_in_one_clear_line(vllm, monkeypatch):
    monkeypatch.delenv("DGEMMA_API_KEY", raising=False)
    with pytest.raises(EngineError, match="HTTP 401"):
        load_engine(vllm.url)


def test_gpu_bench_puts_vllm_beside_the_other_paths_on_the_same_prompt(vllm, keyed, tmp_path):
    out = tmp_path / "gpu.json"
    argv = ["--tiny", "--prompt-tokens", "32", "--ar-tokens", "4", "--canvas", str(CANVAS), "--steps", "2",
            "--repeats", "1", "--vllm", vllm.url, "--json", str(out)]  # fmt: skip
    before = vllm.metric(STEPS), vllm.metric(GENERATED)
    assert gpu_bench.main(argv) == 0
    paths = {p["path"]: p for p in json.loads(out.read_text())["paths"]}
    assert set(paths) == {"ours", "generate", "vllm", "autoregressive"}
    served = paths["vllm"]
    assert vllm.metric(STEPS) - before[0] == 2 * 2  # a warm-up and a timed run, two steps each
    generated = (vllm.metric(GENERATED) - before[1]) / 2  # per run, as the server counted them
    assert served["tokens"] == generated and served["steps"] == 2
    assert served["tokens_per_s"] == pytest.approx(generated / (served["median_ms"] / 1000), rel=1e-9)


async def test_completion_and_rewrite_through_the_language_server(vllm, keyed):
    async with lsp_session(vllm.url, options=NO_DEADLINE) as (client, _):
        open_document(client, URI, SOURCE)
        before = vllm.metric(REQUESTS)
        result = await inline(client, URI, 5, 8)
        assert result is not None and vllm.metric(REQUESTS) > before
        status = client.statuses[-1]
        assert status.state == "ready" and status.device == "remote" and status.error is None
        line = types.Range(
            start=types.Position(line=1, character=4), end=types.Position(line=1, character=36)
        )
        actions = await client.text_document_code_action_async(
            types.CodeActionParams(
                text_document=types.TextDocumentIdentifier(uri=URI),
                range=line,
                context=types.CodeActionContext(diagnostics=[]),
            )
        )
        assert actions and actions[0].kind == types.CodeActionKind.RefactorRewrite
        resolved = await client.code_action_resolve_async(actions[0])
        assert resolved.edit is not None  # a 30% renoised block comes back changed somewhere


async def test_an_answer_cut_by_the_deadline_is_never_served_again_from_the_cache(vllm, keyed):
    """A budget the server cannot meet, then the same request with one it can: the second reaches vLLM
    and shows the model's answer, not the empty one of the first."""
    uri = "file:///work/budget.py"
    tight = {"completion": {"latencyBudgetMs": 1, "syntaxRepair": False}}
    async with lsp_session(vllm.url, options=tight) as (client, _):
        open_document(client, uri, SOURCE)
        cut = await inline(client, uri, 5, 8)
        assert cut is not None and not cut.items
        client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings={"completion": {"latencyBudgetMs": 0}})
        )
        before = vllm.metric(REQUESTS)
        await wait_until(lambda: client.statuses and client.statuses[-1].state == "ready", what="ready")
        again = await inline(client, uri, 5, 8)
        assert again is not None and vllm.metric(REQUESTS) > before
        assert client.statuses[-1].lastSource != "cache"


async def test_the_language_server_survives_the_remote_going_away_and_coming_back(vllm, keyed):
    """And an engine made before the restart goes on after it (its pooled connections died with the old
    server): made here, so that no test depends on another having run first."""
    made_before = load_engine(vllm.url, remote=RemoteSettings(api_key=API_KEY, timeout_s=300))
    try:
        async with lsp_session(vllm.url, options=NO_DEADLINE) as (client, _):
            open_document(client, URI, SOURCE)
            vllm.stop()
            gone = await inline(client, URI, 5, 8)
            assert gone is not None and not gone.items
            assert "cannot connect" in (client.statuses[-1].error or "")
            assert any("cannot connect" in m.message for m in client.messages)  # told once
            vllm.start()
            vllm.warm_up()
            assert (await inline(client, URI, 5, 8)) is not None
            await wait_until(lambda: client.statuses[-1].error is None, what="the error to clear")
            assert client.statuses[-1].state == "ready"
        result = made_before.infill(InfillRequest(prefix="x = ", anchor=")", max_new_tokens=CANVAS))
        assert result.stop_reason in ("eos", "max_tokens")
    finally:
        made_before.close()
