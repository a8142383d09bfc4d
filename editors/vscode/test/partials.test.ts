import * as assert from "node:assert/strict";
import { test } from "node:test";
import { firstLine, headAndRest, Partials, type Shown } from "../src/partials";
import type { AskedAt, ResolvingParams, Span } from "../src/protocol";

const URI = "file:///w/stats.py";
const AT: AskedAt = { uri: URI, version: 3, position: { line: 14, character: 16 } };

function partial(at: AskedAt, spans: Span[], requestId: number | string = 7): ResolvingParams {
  return { textDocument: { uri: at.uri }, version: at.version, position: at.position, requestId, spans };
}

function drawing(): { partials: Partials; drawn: (Shown | undefined)[] } {
  const drawn: (Shown | undefined)[] = [];
  return { partials: new Partials((shown) => drawn.push(shown)), drawn };
}

const SPANS: Span[] = [
  { text: "min(", settled: true },
  { text: "values", settled: false },
];

test("a partial of the request in flight is drawn, and the answer removes it", () => {
  const { partials, drawn } = drawing();
  const ticket = partials.ask(AT);
  assert.ok(partials.resolving(partial(AT, SPANS)));
  assert.deepEqual(drawn, [{ at: AT, spans: SPANS }]);
  partials.answered(ticket);
  assert.deepEqual(drawn.at(-1), undefined);
  assert.equal(partials.drawn, undefined);
  assert.ok(!partials.resolving(partial(AT, SPANS)), "a partial after the answer was drawn");
});

test("a partial of another version, position or document is dropped", () => {
  const { partials, drawn } = drawing();
  partials.ask(AT);
  assert.ok(!partials.resolving(partial({ ...AT, version: 2 }, SPANS)));
  assert.ok(!partials.resolving(partial({ ...AT, position: { line: 14, character: 15 } }, SPANS)));
  assert.ok(!partials.resolving(partial({ ...AT, uri: "file:///w/other.py" }, SPANS)));
  assert.deepEqual(drawn, []);
});

test("a partial with no request in flight is dropped", () => {
  const { partials, drawn } = drawing();
  assert.ok(!partials.resolving(partial(AT, SPANS)));
  assert.deepEqual(drawn, []);
});

test("a newer request removes the older one's partial, and its answer does not end the newer one", () => {
  const { partials, drawn } = drawing();
  const older = partials.ask(AT);
  partials.resolving(partial(AT, SPANS));
  const newer = partials.ask(AT); // asked again at the same place: only the newer one's answer ends it
  assert.equal(drawn.at(-1), undefined);
  partials.answered(older);
  assert.ok(partials.resolving(partial(AT, SPANS, 8)));
  partials.answered(newer);
  assert.equal(partials.drawn, undefined);
});

test("an edit removes the partial and stops the request's later ones; the same version does not", () => {
  const { partials } = drawing();
  partials.ask(AT);
  partials.resolving(partial(AT, SPANS));
  partials.edited(URI, AT.version); // VS Code reports the version the request was asked at
  assert.ok(partials.drawn !== undefined);
  partials.edited("file:///w/other.py", 9);
  assert.ok(partials.drawn !== undefined);
  partials.edited(URI, AT.version + 1);
  assert.equal(partials.drawn, undefined);
  assert.ok(!partials.resolving(partial(AT, SPANS)), "a partial of the edited document's request was drawn");
});

test("the cursor moving away removes the partial; staying where it was asked keeps it", () => {
  const { partials } = drawing();
  partials.ask(AT);
  partials.resolving(partial(AT, SPANS));
  partials.moved(URI, { ...AT.position });
  assert.ok(partials.drawn !== undefined);
  partials.moved(URI, { line: 14, character: 17 });
  assert.equal(partials.drawn, undefined);
  assert.ok(!partials.resolving(partial(AT, SPANS)));
});

test("a partial is cut at its first line break, empty runs left out", () => {
  assert.deepEqual(
    firstLine([
      { text: "", settled: true },
      { text: "if x:", settled: true },
      { text: " y\n    z", settled: false },
      { text: "w", settled: true },
    ]),
    [
      { text: "if x:", settled: true },
      { text: " y", settled: false },
    ],
  );
  assert.deepEqual(firstLine([{ text: "\nnext", settled: true }]), []);
});

test("a partial that shows nothing on the line removes the one drawn", () => {
  const { partials, drawn } = drawing();
  partials.ask(AT);
  partials.resolving(partial(AT, SPANS));
  partials.resolving(partial(AT, [{ text: "\n    return", settled: false }]));
  assert.equal(drawn.at(-1), undefined);
});

test("a partial is drawn as its settled head and the rest", () => {
  assert.deepEqual(headAndRest(SPANS), { head: "min(", rest: "values" });
  assert.deepEqual(
    headAndRest([
      { text: "a", settled: true },
      { text: "b", settled: true },
      { text: "c", settled: false },
      { text: "d", settled: true },
    ]),
    { head: "ab", rest: "cd" },
  );
  assert.deepEqual(headAndRest([{ text: "x", settled: false }]), { head: "", rest: "x" });
  assert.deepEqual(headAndRest([{ text: "x", settled: true }]), { head: "x", rest: "" });
});
