"""The one completion pipeline: the server and the evaluation show the same text for the same cursor."""

from __future__ import annotations

from engine import load_engine
from evaluation.benchmarks import BENCHMARKS, Item
from evaluation.runner import EvalOptions, run_eval
from tests.lsp_session import inline, lsp_session, open_document

TEXT = (
    "import textwrap\n\n"
    "def shorten(text, width):\n    words = text.split()\n    result = \n    return result\n"
)
LINE, COLUMN = 4, len("    result = ")


async def test_eval_and_the_server_give_the_same_text_for_the_same_file_and_cursor(tiny_model_dir):
    cursor = TEXT.index("result = \n") + len("result = ")
    item = Item(
        id="same", language="python", prefix=TEXT[:cursor], suffix=TEXT[cursor:], middle="x", single_line=True
    )
    engine = load_engine(str(tiny_model_dir), device="cpu", threads=1)
    options = EvalOptions(budget_ms=0, execute=False, warmup=False)
    scored = run_eval(engine, BENCHMARKS["santacoder-fim"], [item], options).rows[0].completions["diffusion"]
    server_options = {"threads": 1, "completion": {"latencyBudgetMs": 0}}
    async with lsp_session(tiny_model_dir, options=server_options) as (client, _):
        open_document(client, "file:///project/same.py", TEXT)
        result = await inline(client, "file:///project/same.py", LINE, COLUMN)
    shown = result.items[0].insert_text if result.items else ""
    assert scored.text, "the tiny model writes something here: the comparison is not of two empty answers"
    assert shown == scored.text
    assert scored.mode == "single_line"
