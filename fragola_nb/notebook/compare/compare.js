// The compare grid's view (anywidget): one column per variant. Everything from a model, a
// tool or a person is set with textContent, never as HTML. A click on a column's name sets
// `selected`; the kernel then shows that fork's panel below the grid. What the kernel sends is
// listed in COMMANDS (at the end) and taken by the pure `update`; the view is made of pieces
// (gridNodes, draw, columnSection, drawStream, ...) sharing a context.

function h(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

const STATUS = { queued: "queued", running: "running", finished: "finished",
  waiting: "waiting for you", step_limit: "step limit", stopped: "stopped",
  not_started: "not started", budget: "budget spent", failed: "failed", cancelled: "cancelled" };

function facts(col) {
  const parts = [];
  // no "0 tokens" while a column waits for its first model call's usage
  const counting = col.status === "running" || col.status === "queued";
  if (col.tokens || (col.tokens === 0 && !counting)) parts.push(col.tokens + " tokens");
  if (col.cached) parts.push(String(col.cached));  // "cached": answered by Fragola.cached's file
  if (col.seconds !== null && col.seconds !== undefined) parts.push(Number(col.seconds).toFixed(2) + " s");
  if (col.calls && col.calls.length) parts.push(col.calls.length + (col.calls.length === 1 ? " tool call" : " tool calls"));
  return parts.join(" · ");
}

// An answer is drawn one block per line (the line breaks are the blocks' ends, not
// characters): appending lays out the last line again, not the whole answer (Chrome lays out a
// block of text whole: 60 KB of it in each of 8 columns took 100–500 ms an update, measured).
// An empty line holds a <br>: it keeps its height and copies as an empty line.
function newLine(box) {
  const line = h("div", "fragola-compare-line");
  line.append(document.createElement("br"));
  box.append(line);
  return line;
}

function addToLine(line, node) {
  if (line.firstChild && line.firstChild.nodeName === "BR") line.firstChild.remove();
  line.append(node);
}

function appendText(box, text) {
  let line = box.lastElementChild;
  if (!line || !line.classList.contains("fragola-compare-line")) line = newLine(box);
  String(text).split("\n").forEach((part, i) => {
    if (i > 0) line = newLine(box);
    if (part) addToLine(line, part);
  });
}

// The text an answer box holds, in characters (its lines and the breaks between them).
function shownLength(box) {
  return box.textContent.length + Math.max(0, box.children.length - 1);
}

// How an answer is drawn: "diff" marks the words that differ from the first column (only for
// answers the kernel found close enough to it, see compare/worddiff.py SIMILAR), "plain" shows every
// answer as it is. The kernel sends both forms, so the toggle costs no diff work here.
function wanted(col, first, mode) {
  if (mode === "diff" && Array.isArray(col.diff) && !first) return ["diff", JSON.stringify(col.diff)];
  return ["plain", String(col.answer || "")];
}

// What each answer box shows (wanted's pair): a redraw leaves a box alone when it shows what
// its column has, and appends when the column's text goes on from it (a finished column's
// answer is the text it streamed), for a box of 60 KB costs its whole layout again.
const shows = new WeakMap();

function answer(col, first, mode) {
  const box = h("div", "fragola-compare-answer" + (col.streaming ? " fragola-compare-streaming" : ""));
  const [kind, key] = wanted(col, first, mode);
  if (kind === "diff") {
    // a block per line too: a long answer's layout is that of its lines
    let line = newLine(box);
    for (const [kind, text] of col.diff) {
      const cls = kind === "new" ? "fragola-diff-new" : kind === "gone" ? "fragola-diff-gone" : "fragola-diff-same";
      String(text).split("\n").forEach((part, i) => {
        if (i > 0) line = newLine(box);
        if (!part) return;
        const piece = h(kind === "new" ? "ins" : kind === "gone" ? "del" : "span", cls, part);
        if (kind !== "same") piece.title = kind === "new" ? "not in the first column" : "only in the first column";
        addToLine(line, piece);
      });
    }
  } else {
    appendText(box, key);
  }
  box.dataset.name = col.name;
  shows.set(box, [kind, key]);
  return box;
}

// A column's parts around its answer: the header, facts, calls and the "apart" line above it,
// the note and the error below.
function parts(col, index, selected, model, live, mode, firstName) {
  const head = h("button", "fragola-compare-head");
  head.type = "button";
  head.title = !live ? "no kernel: this grid is read-only"
    : col.name === selected ? "close this branch's panel" : "open this branch's panel below";
  head.disabled = !live;
  head.setAttribute("aria-pressed", col.name === selected ? "true" : "false");
  head.append(h("bdi", "fragola-compare-name", col.name));
  const status = String(col.status).replace(/[^a-z_]/g, "");
  head.append(h("span", "fragola-compare-status fragola-compare-status-" + status, STATUS[status] || status));
  head.addEventListener("click", () => {
    if (!live) return;
    model.set("selected", col.name === model.get("selected") ? "" : col.name);
    model.save_changes();
  });
  const above = [head], below = [];
  const line = facts(col);
  if (line) above.push(h("div", "fragola-compare-facts", line));
  if (col.calls && col.calls.length) {
    const calls = h("ul", "fragola-compare-calls");
    // a no-break space: the arrow stays on the call's first line when the call wraps
    for (const c of col.calls) calls.append(h("li", "", "→\u00a0" + c));
    above.push(calls);
  }
  if (col.apart && mode === "diff" && index > 0) {
    above.push(h("div", "fragola-compare-apart", "little in common with " + firstName + ": shown as it is"));
  }
  if (col.note) below.push(h("div", "fragola-compare-note", col.note));
  if (col.error) below.push(h("div", "fragola-compare-error", col.error));
  return [above, below];
}

const atEnd = (a) => a.scrollTop + a.clientHeight >= a.scrollHeight - 4;
// Characters of answers built in one task: eight answers of 60 KB (with their word
// differences) built at once held the page 300–600 ms; a column a task, tens of ms each. A
// redraw builds what fits in SMALL at once (no column shows empty for a frame), and leaves
// the rest to tasks after the next frames: the frame that shows a column's last streamed text
// is painted first.
const BUDGET = 60000, SMALL = 20000;

// -- the grid, piece by piece ---------------------------------------------------------------------
// The pieces share the view's context `cx`: the model, the nodes (gridNodes), `link` (live:
// the kernel answered its hello; waited: 2 s went by without it), the answers' `mode`, the
// streamed texts (`streamed`), and the columns drawn (`drawn`, `queue`: see draw).

function gridNodes(el) {
  // The header's tools: how answers are shown, and, when the columns do not all fit, how
  // many there are and which way the rest are (a narrow notebook shows two of eight).
  const top = h("div", "fragola-compare-top");
  const tools = h("div", "fragola-compare-tools");
  const modes = h("span", "fragola-compare-modes");
  modes.setAttribute("role", "group");
  modes.setAttribute("aria-label", "answers shown as");
  const diffButton = h("button", "fragola-compare-mode", "diff words");
  const plainButton = h("button", "fragola-compare-mode", "plain");
  diffButton.title = "mark the words that differ from the first column";
  plainButton.title = "show every answer as it is";
  for (const b of [diffButton, plainButton]) b.type = "button";
  modes.append(h("span", "", "answers: "), diffButton, plainButton);
  const more = h("button", "fragola-compare-more");
  more.type = "button";
  more.title = "scroll the columns sideways";
  tools.append(modes, more);
  const scroller = h("div", "fragola-compare-scroller");
  const grid = h("div", "fragola-compare-grid");
  scroller.append(grid);
  const legend = h("div", "fragola-compare-legend");
  legend.append(h("span", "", "differences from the first column: "),
    h("ins", "fragola-diff-new", "added"), h("span", "", " "), h("del", "fragola-diff-gone", "left out"));
  const detached = h("div", "fragola-compare-detached");
  el.replaceChildren(top, tools, scroller, legend, detached);
  return { top, modes, diffButton, plainButton, more, scroller, grid, legend, detached };
}

// The scroll cue reads the layout: once per frame at most, however fast columns stream.
function cue(cx) {
  const { grid, scroller, more } = cx;
  cx.cueQueued = false;
  // Not laid out (JupyterLab hides outputs while it restyles, on a theme change): nothing
  // to measure; the cue is read again when the grid has its size back.
  if (!grid.clientWidth) return;
  const total = grid.children.length;
  const overflow = grid.scrollWidth > grid.clientWidth + 1;
  const atStart = grid.scrollLeft <= 1;
  const atEnd = grid.scrollLeft + grid.clientWidth >= grid.scrollWidth - 1;
  scroller.classList.toggle("fragola-compare-more-right", overflow && !atEnd);
  scroller.classList.toggle("fragola-compare-more-left", overflow && !atStart);
  if (!overflow) { more.hidden = true; more.textContent = ""; return; }
  // which columns show (at least partly): "columns 2–3 of 8"
  const box = grid.getBoundingClientRect();
  let first = 0, last = 0;
  [...grid.children].forEach((c, i) => {
    const r = c.getBoundingClientRect();
    if (r.right > box.left + 40 && r.left < box.right - 40) { if (!first) first = i + 1; last = i + 1; }
  });
  if (first === 1 && last === total) { more.hidden = true; return; }  // a pixel's overflow
  more.hidden = false;
  const where = first === last ? "column " + first : "columns " + first + "–" + last;
  more.textContent = where + " of " + total + " · scroll " + (atEnd ? "←" : atStart ? "→" : "↔");
}

function queueCue(cx) {
  if (cx.cueQueued) return;
  cx.cueQueued = true;
  requestAnimationFrame(() => cue(cx));
}

const current = (cx) => (cx.model.get("columns") || []).map((c) => withStream(cx.streamed, c));

// A built box in place of its column's old one: a streaming answer read at its end follows
// what comes, any other keeps where the reader was.
function place(entry, box, streaming) {
  const old = entry.box;
  const was = old && old.isConnected ? { top: old.scrollTop, end: atEnd(old) } : null;
  if (old) old.replaceWith(box);
  else entry.section.insertBefore(box, entry.below);
  entry.box = box;
  box.scrollTop = streaming && (!was || was.end) ? box.scrollHeight : was ? was.top : 0;
}

// Build the queued boxes, in column order, up to `budget` characters (`atLeastOne`: the
// first whatever its size); the rest after the next frame.
function slice(cx, budget, atLeastOne) {
  const { queue, drawn } = cx;
  let spent = 0;
  for (const [i, c] of current(cx).entries()) {
    if (!queue.has(c.name)) continue;
    const size = (c.answer || "").length + 1;
    if (spent + size > budget && !(atLeastOne && !spent)) break;
    queue.delete(c.name);
    const entry = drawn.get(c.name);
    if (!entry) continue;
    place(entry, answer(c, i === 0, cx.mode), !!c.streaming);
    spent += size;
  }
  for (const name of queue) if (!drawn.has(name)) queue.delete(name);
  if (queue.size && !cx.later) {
    cx.later = true;
    requestAnimationFrame(() => setTimeout(() => {
      cx.later = false;
      if (!cx.gone) slice(cx, BUDGET, true);
    }));
  }
}

// A column's answer box as the column has it now: kept, appended to, or queued to build.
function fitAnswer(cx, entry, c, i) {
  const { queue } = cx;
  if (c.kept && !c.answer && entry.box) {  // its text cleared: the box keeps it as the answer
    entry.box.classList.remove("fragola-compare-streaming");
    queue.delete(c.name);
    return;
  }
  if (!c.answer && !c.diff) {
    if (entry.box) { entry.box.remove(); entry.box = null; }
    queue.delete(c.name);
    return;
  }
  const [kind, key] = wanted(c, i === 0, cx.mode);
  const a = entry.box;
  const has = a ? shows.get(a) : null;
  if (a) a.classList.toggle("fragola-compare-streaming", !!c.streaming);
  if (has && has[0] === "plain" && has[1] !== c.answer && String(c.answer || "").startsWith(has[1])
      && shownLength(a) === has[1].length) {
    // the column's text goes on from the box's (the end of a streamed reply): shown now,
    // even while its word differences wait to be built
    const end = atEnd(a);
    appendText(a, String(c.answer).slice(has[1].length));
    shows.set(a, ["plain", String(c.answer)]);
    if (c.streaming && end) a.scrollTop = a.scrollHeight;
  }
  const now = a ? shows.get(a) : null;
  if (now && now[0] === kind && now[1] === key) queue.delete(c.name);
  else queue.add(c.name);
}

// Each column's section, kept from one draw to the next: name -> { section, box (its
// answer), below (the first part under the box), sig (what its small parts were drawn
// from) }. A redraw rebuilds the small parts that changed, and an answer box only when its
// text does: the boxes to build go a few a frame (`queue`), the old box on show meanwhile.
function columnSection(cx, c, i, selected, firstName) {
  let entry = cx.drawn.get(c.name);
  if (!entry) {
    entry = { section: h("section"), box: null, below: null, sig: "" };
    cx.drawn.set(c.name, entry);
  }
  const { answer: _text, diff: _diff, ...rest } = c;
  const sig = JSON.stringify([rest, i, selected, cx.link.live, cx.mode, firstName]);
  if (sig !== entry.sig) {
    entry.sig = sig;
    entry.section.className = "fragola-compare-col" + (c.name === selected ? " fragola-compare-selected" : "");
    const [above, below] = parts(c, i, selected, cx.model, cx.link.live, cx.mode, firstName);
    for (const child of [...entry.section.children]) if (child !== entry.box) child.remove();
    if (entry.box) { entry.box.before(...above); entry.box.after(...below); }
    else entry.section.append(...above, ...below);
    entry.below = below[0] || null;
  }
  fitAnswer(cx, entry, c, i);
  return entry.section;
}

function draw(cx) {
  const { model, grid, mode } = cx;
  const title = model.get("title") || {};
  const cols = current(cx);
  cx.top.textContent = (title.agent || "") + " · " + cols.length + " variant(s)" +
    (title.done ? "" : " · running") + ": " + (title.message || "");
  const selected = model.get("selected");
  const firstName = cols.length ? cols[0].name : "";
  const sections = cols.map((c, i) => columnSection(cx, c, i, selected, firstName));
  const names = new Set(cols.map((c) => c.name));
  for (const name of [...cx.drawn.keys()]) if (!names.has(name)) cx.drawn.delete(name);
  if (sections.length !== grid.children.length || sections.some((s, i) => grid.children[i] !== s)) {
    const left = grid.scrollLeft;
    grid.replaceChildren(...sections);
    grid.scrollLeft = left;
  }
  slice(cx, SMALL, false);
  const compared = cols.some((c, i) => i > 0 && (Array.isArray(c.diff) || c.apart));
  cx.modes.hidden = !compared;
  cx.diffButton.setAttribute("aria-pressed", mode === "diff" ? "true" : "false");
  cx.plainButton.setAttribute("aria-pressed", mode === "plain" ? "true" : "false");
  cx.legend.hidden = mode !== "diff" || !cols.some((c, i) => i > 0 && Array.isArray(c.diff));
  const why = model.get("detached");
  cx.detached.textContent = why ? "detached: " + why
    : !cx.link.live && cx.link.waited ? "read-only: no kernel; run the cell again to open a branch's panel" : "";
  queueCue(cx);
}

// The streamed texts `update` made of a stream message, into the answer boxes on show: an add
// appended, not the whole text set again (an update costs its new text however long the
// answer grows); a column's first text draws the grid again (its answer box is made).
function drawStream(cx, cols, before) {
  let redraw = false;
  const writes = [];
  for (const [name, m] of Object.entries(cols || {})) {
    const text = cx.streamed.get(name);
    if (!text) continue;  // stored: the next `columns` draws it
    const entry = cx.drawn.get(name);
    const a = entry && entry.box;
    if (!a || !a.classList.contains("fragola-compare-streaming")) {
      // its first text: the column gets its answer box (the last text of a column drawn
      // finished already changes nothing: its stored answer is on show)
      const c = (cx.model.get("columns") || []).find((col) => col.name === name);
      if (c && (c.status === "running" || c.streaming || c.kept)) redraw = true;
      continue;
    }
    // read every column's scroll before any write: one layout, not one per column
    writes.push([a, m, before.get(name) || "", text, atEnd(a)]);
  }
  for (const [a, m, had, text] of writes) {
    if ("add" in m && shownLength(a) === had.length) appendText(a, m.add);
    else { a.replaceChildren(); appendText(a, text); }
    shows.set(a, ["plain", text]);
  }
  for (const [a, , , , end] of writes) if (end) a.scrollTop = a.scrollHeight;
  if (redraw) draw(cx);
}

// -- the kernel's messages ----------------------------------------------------------------------
// What the kernel sends the grid (custom messages), and the pure functions that take them.
export const COMMANDS = Object.freeze({
  live: { by: "update", says: "`{live: true}`: the kernel answers the view's hello (compare/view.py)" },
  stream: { by: "update", says: "`{t: \"stream\", cols: {name: {add} or {text}}}`: what is new in each streaming column (compare/view.py); a new view gets every streaming text whole, in answer to its hello" },
});

export const commandOf = (msg) =>
  !msg || typeof msg !== "object" ? null : msg.t === "stream" ? "stream" : msg.live ? "live" : null;

// (state, message) -> state, touching neither the page nor the model; the state is {live,
// streamed: Map(column name -> its text so far)}: `live` once the kernel answers; a stream
// message adds to (`add`) or sets (`text`) each column's text, and an empty text drops it
// (its answer is stored: the next `columns` holds it).
export function update(state, msg) {
  const kind = commandOf(msg);
  if (kind === "live") return state.live ? state : { ...state, live: true };
  if (kind !== "stream") return state;
  const streamed = new Map(state.streamed);
  for (const [name, m] of Object.entries(msg.cols || {})) {
    const text = "add" in m ? (streamed.get(name) || "") + m.add : String(m.text || "");
    if (text) streamed.set(name, text); else streamed.delete(name);
  }
  return { ...state, streamed };
}

// The streamed texts kept for `columns`: a streaming column's text is the stream messages'
// (the kernel sends it "" in `columns`), and so is a column's that ended with the text it
// streamed while others go on ("kept": its answer is that text, left out of `columns` until
// the comparison is done); any other column's is dropped.
export function keepStreamed(streamed, columns) {
  const next = new Map(streamed);
  for (const c of columns || []) {
    if (!c.streaming && !c.kept) next.delete(c.name);
    else if (c.answer && !next.has(c.name)) next.set(c.name, c.answer);
  }
  return next;
}

// A column as drawn: with its streamed text as its answer while it runs, or when kept.
export function withStream(streamed, c) {
  const text = streamed.get(c.name);
  if (text && (c.status === "running" || c.streaming)) return { ...c, answer: text, streaming: true };
  return text && c.kept ? { ...c, answer: text } : c;
}

function render({ model, el }) {
  el.classList.add("fragola-compare");
  const cx = { model, el, ...gridNodes(el), link: { live: false, waited: false }, mode: "diff",
    cueQueued: false, streamed: new Map(), drawn: new Map(), queue: new Set(), later: false, gone: false };
  const { grid, more } = cx;
  more.addEventListener("click", () => {
    const atEnd = grid.scrollLeft + grid.clientWidth >= grid.scrollWidth - 1;
    const step = Math.max(grid.clientWidth * 0.8, 200);
    grid.scrollBy({ left: atEnd ? -grid.scrollWidth : step, behavior: "smooth" });
  });
  grid.addEventListener("scroll", () => queueCue(cx), { passive: true });
  const resized = typeof ResizeObserver === "function" ? new ResizeObserver(() => queueCue(cx)) : null;
  if (resized) resized.observe(grid);
  const setMode = (next) => { cx.mode = next; draw(cx); };
  cx.diffButton.addEventListener("click", () => setMode("diff"));
  cx.plainButton.addEventListener("click", () => setMode("plain"));
  const redraw = () => draw(cx);
  const onColumns = () => { cx.streamed = keepStreamed(cx.streamed, model.get("columns")); draw(cx); };
  onColumns();
  const events = ["change:title", "change:selected", "change:detached"];
  for (const e of events) model.on(e, redraw);
  model.on("change:columns", onColumns);
  const onMessage = (msg) => {
    const before = { live: cx.link.live, streamed: cx.streamed };
    const after = update(before, msg);
    if (after === before) return;
    cx.streamed = after.streamed;
    if (commandOf(msg) === "stream") { drawStream(cx, msg.cols, before.streamed); return; }
    cx.link.live = true;
    draw(cx);
  };
  model.on("msg:custom", onMessage);
  model.send({ do: "hello" });
  const waited = setTimeout(() => { cx.link.waited = true; draw(cx); }, 2000);
  return () => {
    clearTimeout(waited);
    cx.gone = true;
    if (resized) resized.disconnect();
    model.off("msg:custom", onMessage);
    for (const e of events) model.off(e, redraw);
    model.off("change:columns", onColumns);
  };
}

export default { render };
