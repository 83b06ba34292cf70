// The evaluation matrix's view (anywidget): cases down, variants across. Everything from a
// model, a grader or a case is set with textContent, never as HTML. Only the rows in sight
// are drawn (an evaluation may have thousands of cases); a click on a cell sets `selected`,
// and the kernel sends that row's `detail` and shows its fork's panel below the matrix.
// While rows finish, the kernel may send only the cells that changed: `{do: "patch", cells:
// [[index, cell], ...], flags: [[index, flags or null], ...]}`; the pure `update` takes it (the
// kernel's messages are listed in COMMANDS, at the end) and those cells alone are redrawn.
// The view is made of pieces (matrixNodes, drawHead, drawRows, drawDetail, ...) sharing a context.
// A narrow matrix (under NARROW px: a 700 px window) has two-line rows, the case on the
// first line across the row and the variants' cells under it, wrapped variant heads and the
// change badges as their symbol, so every variant's marks stay in sight with up to 4
// variants in a 330 px output; more scroll sideways, and the cue says so.

const ROW = 26; // px: every row is one line high, so the rows in sight follow from scrollTop
const ROW_NARROW = 40; // px: a narrow matrix's row, its case over its cells
const NARROW = 720; // px: a matrix narrower than this is laid out narrow
const EXTRA = 12; // rows drawn above and below the ones in sight, for a smooth scroll

function h(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

const MARK = { p: "✓", f: "✗", q: "·", r: "◌", s: "■", n: "–" };
const SAYS = { p: "passed", f: "failed", q: "queued", r: "running", s: "stopped", n: "not run" };
// a change's badge: its symbol, then its word (hidden in a narrow matrix when there is a symbol)
const CHANGE = { improved: ["▲", " improved"], regressed: ["▼", " regressed"], new: ["", "new"],
  gone: ["", "gone"], "other answers": ["≠", " answers"] };
const CHANGE_SAYS = { "other answers": "the same verdicts as the baseline, other answers" };

// The cell detail's trajectory: the counts, the fork's own tool calls as a compact numbered
// list (name(arguments) → result), then the turns of a conversation. Text only.
function trajectorySection(t) {
  if (!t || (!(t.calls || []).length && !(t.turns || []).length && !t.ended)) return null;
  const box = h("div", "fragola-eval-trajectory");
  const facts = [];
  if (t.ended) facts.push("ended: " + t.ended);
  const counted = (n, kind) => n + " " + kind + (n === 1 ? " call" : " calls");
  facts.push(counted((t.calls || []).length + (t.more || 0), "tool"));
  if (t.model_calls !== null && t.model_calls !== undefined) facts.push(counted(t.model_calls, "model"));
  if (t.user_calls) facts.push(t.user_calls + " by the simulated user");
  box.append(h("div", "fragola-eval-tfacts", "trajectory · " + facts.join(" · ")));
  if ((t.calls || []).length) {
    const calls = h("ol", "fragola-eval-calls");
    for (const c of t.calls) {
      calls.append(h("li", "fragola-eval-call", c.name + "(" + c.arguments + ")" +
        (c.result === null ? " · no result" : " → " + c.result)));
    }
    if (t.more) calls.append(h("li", "fragola-eval-call", "… and " + t.more + " more"));
    box.append(calls);
  }
  if ((t.turns || []).length) {
    const turns = h("ol", "fragola-eval-turns");
    for (const turn of t.turns) {
      const item = h("li", "fragola-eval-turn");
      item.append(h("div", "fragola-eval-tuser", "user: " + turn.user),
        h("div", "fragola-eval-treply", "agent: " + (turn.reply === null ? "(no reply)" : turn.reply)));
      turns.append(item);
    }
    box.append(turns);
  }
  return box;
}

// -- verdicts, intervals, flaky cells and labels (the `verdicts` and `flags` traits) -------------

function fraction(x) {
  return Math.max(0, Math.min(1, Number(x) || 0));
}

// A variant's pass rate with its 95% interval: the text, and a bar (the interval) with a dot
// (the rate). Positions are numbers computed here; no model text reaches a style.
function intervalNode(info) {
  const box = h("div", "fragola-eval-vci");
  if (!info) return box;
  box.title = "pass rate " + info.text + " (95% interval) over " + info.cases + " case" +
    (info.cases === 1 ? "" : "s");
  const bar = h("span", "fragola-eval-bar");
  bar.setAttribute("aria-hidden", "true");
  if (info.low !== null && info.low !== undefined) {
    const range = h("span", "fragola-eval-bar-range");
    range.style.left = (fraction(info.low) * 100).toFixed(1) + "%";
    range.style.width = ((fraction(info.high) - fraction(info.low)) * 100).toFixed(1) + "%";
    bar.append(range);
  }
  const dot = h("span", "fragola-eval-bar-dot");
  dot.style.left = (fraction(info.rate) * 100).toFixed(1) + "%";
  bar.append(dot);
  const low = info.low === null || info.low === undefined ? "" : info.text.replace(/^\S+ /, "");
  box.append(bar, h("span", "fragola-eval-vci-text", low));
  return box;
}

function verdictNodes(data) {
  return ((data && data.lines) || []).map((line) =>
    h("div", "fragola-eval-verdict" + (line.decided ? " fragola-eval-verdict-decided" : ""), line.text));
}

const LABEL_SAYS = { y: "labelled passed by hand", n: "labelled failed by hand" };

function flagCell(box, flags, labels) {
  if (!flags) return;
  if (flags[0]) {
    box.classList.add("fragola-eval-flaky");
    const mark = h("span", "fragola-eval-flakymark", "≈");
    mark.title = "flaky: its repeats disagree, so a flip here may be chance";
    box.append(mark);
  }
  const marks = box.querySelectorAll(".fragola-eval-mark");
  for (let r = 0; r < marks.length; r++) {
    const said = LABEL_SAYS[String(labels || "")[r]];
    if (!said) continue;
    marks[r].classList.add("fragola-eval-mark-labelled");
    marks[r].title += " · " + said;
  }
}

// ✓ / ✗ and a note under a row's detail: a message to the kernel, which labels the row.
function labelControls(model, d, live) {
  const box = h("div", "fragola-eval-labelbox");
  if (!d.finished) return box;
  const label = d.label || null;
  box.append(h("span", "fragola-eval-labeltitle", label ? "your label:" : "label it:"));
  const note = h("input", "fragola-eval-labelnote");
  note.type = "text";
  note.placeholder = "note (optional)";
  note.maxLength = 2000;
  note.value = label ? label.note : "";
  note.setAttribute("aria-label", "label note");
  const send = (passed) => {
    const at = model.get("selected") || [];
    if (at.length !== 3 || !live) return;
    model.send({ do: "label", at: at, passed: passed, note: note.value });
  };
  for (const [passed, text, says] of [[true, "✓", "label: passed"], [false, "✗", "label: failed"]]) {
    const button = h("button", "fragola-eval-labelbtn fragola-eval-label-" + (passed ? "y" : "n"), text);
    button.type = "button";
    button.title = says;
    button.setAttribute("aria-label", says);
    button.setAttribute("aria-pressed", String(!!label && label.passed === passed));
    button.disabled = !live;
    button.addEventListener("click", () => send(passed));
    box.append(button);
  }
  box.append(note);
  if (label) {
    const clear = h("button", "fragola-eval-labelbtn", "clear");
    clear.type = "button";
    clear.disabled = !live;
    clear.addEventListener("click", () => send(null));
    box.append(clear);
  }
  note.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && label) send(label.passed);
  });
  return box;
}

// -- the matrix, piece by piece ---------------------------------------------------------------
// The view's pieces share its context `mx`: the model, the nodes (matrixNodes), `link` (live:
// the kernel answered; waited: 2 s went by without it), the case indexes the filters let through
// (`shown`), what the drawn rows show (`drawn`: redrawn only when it changes), and the layout
// (`widths`, `template`, `narrow`, `rowHeight`).

function checkbox(label) {
  const box = h("label", "fragola-eval-filter");
  const input = h("input");
  input.type = "checkbox";
  box.append(input, h("span", "", label));
  return [box, input];
}

function matrixNodes(el) {
  const top = h("div", "fragola-eval-top");
  const tools = h("div", "fragola-eval-tools");
  const [failedOnly, failedBox] = checkbox(" failed only");
  const [changedOnly, changedBox] = checkbox(" changed only");
  const count = h("span", "fragola-eval-count");
  // Hidden columns (many variants, a narrow notebook) are named, and a click scrolls to them.
  const more = h("button", "fragola-eval-more");
  more.type = "button";
  more.hidden = true;
  more.title = "scroll the variants sideways";
  tools.append(failedOnly, changedOnly, count, more);
  const against = h("div", "fragola-eval-against");
  const frame = h("div", "fragola-eval-frame"); // holds the shadows on the hidden side
  const scroller = h("div", "fragola-eval-scroller");
  const table = h("div", "fragola-eval-table");
  table.setAttribute("role", "table");
  const head = h("div", "fragola-eval-row fragola-eval-head");
  head.setAttribute("role", "row");
  const body = h("div", "fragola-eval-body");
  const spacer = h("div", "fragola-eval-spacer");
  const rowsBox = h("div", "fragola-eval-rows");
  body.append(spacer, rowsBox);
  table.append(head, body);
  scroller.append(table);
  frame.append(scroller);
  const detail = h("div", "fragola-eval-detail");
  const detached = h("div", "fragola-eval-detached");
  const verdicts = h("div", "fragola-eval-verdicts");
  el.replaceChildren(top, against, verdicts, tools, frame, detail, detached);
  return { top, failedBox, changedBox, changedOnly, count, more, against, frame, scroller, head,
    body, spacer, rowsBox, detail, detached, verdicts };
}

const variantCount = (model) => ((model.get("head") || {}).variants || []).length || 1;

// Every row is a grid of its own, with the head's columns: each variant's column is as wide
// as its header (name, pass rate, cost, each on a line: the kernel writes them) or its
// cells (a mark per repeat, the score, a change's badge), whichever is wider. Widths are
// measured in the page and only grow while the view lives, so a run's updates never make
// the columns jump back and forth.
function cellWidth(mx) {
  const info = mx.model.get("head") || {};
  const em = parseFloat(getComputedStyle(mx.head).fontSize) || 13;
  const repeats = (info.repeat || 1) * 1.7;
  return Math.ceil((mx.narrow ? Math.max(4.5, repeats * 0.9 + 2.7 + (info.baseline ? 1.5 : 0))
    : Math.max(8.5, repeats + 3.8 + (info.baseline ? 6.5 : 0))) * em);
}

// narrow: no case column (the case is above the cells, across the row), the rest of the
// width after the variants' columns
const caseColumn = (mx) => (mx.narrow ? "" : "minmax(9em, 1fr) ");
const restColumn = (mx) => (mx.narrow ? " minmax(0, 1fr)" : "");
const columns = (mx, n) => caseColumn(mx) + (mx.widths.length !== n ? "max-content ".repeat(n).trim()
  : mx.widths.map((w) => w + "px").join(" ")) + restColumn(mx);

// Narrow or not follows the matrix's own width (the output's, not the window's).
function layout(mx) {
  const now = mx.scroller.clientWidth > 0 && mx.scroller.clientWidth < NARROW;
  if (now === mx.narrow) return;
  mx.narrow = now;
  const at = mx.body.scrollTop / mx.rowHeight; // the row at the top stays at the top
  mx.rowHeight = mx.narrow ? ROW_NARROW : ROW;
  mx.el.classList.toggle("fragola-eval-narrow", mx.narrow);
  mx.widths = [];
  mx.spacer.style.height = mx.shown.length * mx.rowHeight + "px";
  mx.body.scrollTop = at * mx.rowHeight;
  mx.drawn = "";
}

function fit(mx) {
  const { head } = mx;
  const boxes = head.querySelectorAll(".fragola-eval-vhead");
  if (!head.isConnected || !head.clientWidth) return; // not laid out yet: measured later
  layout(mx);
  head.style.gridTemplateColumns = caseColumn(mx) + "max-content ".repeat(boxes.length).trim() + restColumn(mx);
  const least = cellWidth(mx);
  const next = [...boxes].map((b, i) =>
    Math.max(Math.ceil(b.getBoundingClientRect().width) + 2, least,
      mx.widths.length === boxes.length ? mx.widths[i] : 0));
  mx.widths = next;
  const now = columns(mx, next.length);
  head.style.gridTemplateColumns = now;
  if (now !== mx.template) { mx.template = now; mx.drawn = ""; queueRows(mx); }
  queueCue(mx);
}

// Which variants are in sight, when some are not: "variants 1–3 of 8 · scroll →".
function cue(mx) {
  const { scroller, frame, more } = mx;
  mx.cueQueued = false;
  if (!scroller.clientWidth) return;
  const overflow = scroller.scrollWidth > scroller.clientWidth + 1;
  const atStart = scroller.scrollLeft <= 1;
  const atEnd = scroller.scrollLeft + scroller.clientWidth >= scroller.scrollWidth - 1;
  frame.classList.toggle("fragola-eval-more-right", overflow && !atEnd);
  frame.classList.toggle("fragola-eval-more-left", overflow && !atStart);
  const heads = [...mx.head.querySelectorAll(".fragola-eval-vhead")];
  const seen = scroller.getBoundingClientRect();
  let first = 0, last = 0;
  heads.forEach((c, i) => {
    const r = c.getBoundingClientRect();
    if (r.left >= seen.left - 1 && r.right <= seen.right + 1) { if (!first) first = i + 1; last = i + 1; }
  });
  if (!overflow || (first === 1 && last === heads.length)) { more.hidden = true; more.textContent = ""; return; }
  more.hidden = false;
  const where = !first ? heads.length + " variants" // none whole in a very narrow output
    : (first === last ? "variant " + first : "variants " + first + "–" + last) + " of " +
      heads.length + " in sight";
  more.textContent = where + " · scroll " + (atEnd ? "←" : atStart ? "→" : "↔");
}

function queueCue(mx) {
  if (mx.cueQueued) return;
  mx.cueQueued = true;
  requestAnimationFrame(() => cue(mx));
}

function drawHead(mx) {
  const info = mx.model.get("head") || {};
  const variants = info.variants || [];
  mx.top.textContent = "Evaluation · " + (info.title || "");
  mx.against.textContent = info.against ? "against the baseline: " + info.against : "";
  if (mx.widths.length !== variants.length) mx.widths = [];
  mx.head.style.gridTemplateColumns = columns(mx, variants.length);
  const intervals = (mx.model.get("verdicts") || {}).intervals || [];
  const cells = [h("div", "fragola-eval-case", "case")];
  for (const [i, v] of variants.entries()) {
    const box = h("div", "fragola-eval-vhead");
    box.setAttribute("role", "columnheader");
    const name = h("bdi", "fragola-eval-vname", v.name);
    name.title = v.name;
    box.append(name);
    // one line each: the pass rate, its interval (a bar), the cost, rows left
    const facts = h("div", "fragola-eval-vfacts");
    facts.append(h("div", "fragola-eval-vrate", v.rate_text));
    facts.append(intervalNode(intervals[i]));
    if (v.cost) facts.append(h("div", "fragola-eval-vcost", v.cost));
    if (v.left) facts.append(h("div", "fragola-eval-vleft", v.left));
    box.append(facts);
    cells.push(box);
  }
  mx.head.replaceChildren(...cells);
  mx.changedOnly.hidden = !info.baseline;
  if (!info.baseline) mx.changedBox.checked = false;
  fit(mx);
}

// The case indexes a filter lets through: with "failed only", the cases with a failed mark in
// some variant; with "changed only", those with a change from the baseline in some variant.
export function casesShown(cases, cells, width, failed, changed) {
  const shown = [];
  for (let c = 0; c < cases.length; c++) {
    let keep = true;
    if (failed || changed) {
      let anyFailed = false, anyChanged = false;
      for (let v = 0; v < width; v++) {
        const cell = cells[c * width + v];
        if (!cell) continue;
        if (String(cell[0]).includes("f")) anyFailed = true;
        if (cell[2]) anyChanged = true;
      }
      keep = (!failed || anyFailed) && (!changed || anyChanged);
    }
    if (keep) shown.push(c);
  }
  return shown;
}

function filter(mx) {
  const cases = mx.model.get("cases") || [];
  const failed = mx.failedBox.checked, changed = mx.changedBox.checked;
  mx.shown = casesShown(cases, mx.model.get("cells") || [], variantCount(mx.model), failed, changed);
  mx.count.textContent = (failed || changed ? mx.shown.length + " of " : "") + cases.length + " cases";
  mx.spacer.style.height = mx.shown.length * mx.rowHeight + "px";
  mx.drawn = "";
}

function cellNode(mx, c, v, cell, selected) {
  const box = h("div", "fragola-eval-cell");
  box.setAttribute("role", "cell");
  const width = variantCount(mx.model);
  const live = mx.link.live;
  box.dataset.cell = c * width + v;
  const marks = String(cell ? cell[0] : "");
  const score = cell ? cell[1] : null;
  const change = cell ? cell[2] : "";
  const isSelected = selected.length === 3 && selected[0] === c && selected[1] === v;
  if (isSelected) box.classList.add("fragola-eval-selected");
  if (marks.includes("f")) box.classList.add("fragola-eval-failed");
  else if (marks && [...marks].every((m) => m === "p")) box.classList.add("fragola-eval-passed");
  for (let r = 0; r < marks.length; r++) {
    const m = marks[r];
    const mark = h("button", "fragola-eval-mark fragola-eval-mark-" + (MARK[m] ? m : "n"), MARK[m] || "–");
    mark.type = "button";
    mark.disabled = !live;
    mark.dataset.at = c + "," + v + "," + r;
    mark.title = (marks.length > 1 ? "repeat " + (r + 1) + ": " : "") + (SAYS[m] || m) +
      (live ? " · open its panel" : "");
    if (isSelected && selected[2] === r) mark.classList.add("fragola-eval-mark-open");
    box.append(mark);
  }
  if (score !== null && score !== undefined) box.append(h("span", "fragola-eval-score", Number(score).toFixed(2)));
  if (change) {
    const [symbol, word] = CHANGE[change] || ["", change];
    const badge = h("span", "fragola-eval-change fragola-eval-change-" + change.replace(/[^a-z]/g, ""), symbol);
    if (symbol) badge.append(h("span", "fragola-eval-change-word", word));
    else badge.textContent = word;
    badge.title = CHANGE_SAYS[change] || change;
    box.append(badge);
  }
  const flags = (mx.model.get("flags") || {})[String(c * width + v)];
  if (flags) flagCell(box, flags, flags[1]);
  return box;
}

function drawRows(mx) {
  mx.queued = false;
  const { model, body, rowsBox } = mx;
  const cases = model.get("cases") || [];
  const cells = model.get("cells") || [];
  const width = variantCount(model);
  const selected = model.get("selected") || [];
  if (mx.widths.length !== width) fit(mx); // measured once the head is in the page
  const height = body.clientHeight || 400;
  const first = Math.max(0, Math.floor(body.scrollTop / mx.rowHeight) - EXTRA);
  const last = Math.min(mx.shown.length, Math.ceil((body.scrollTop + height) / mx.rowHeight) + EXTRA);
  const key = first + ":" + last + ":" + mx.link.live + ":" + selected.join(",");
  if (key === mx.drawn) return;
  mx.drawn = key;
  const template = columns(mx, width);
  const rows = [];
  for (let i = first; i < last; i++) {
    const c = mx.shown[i];
    const row = h("div", "fragola-eval-row");
    row.setAttribute("role", "row");
    row.dataset.i = i;
    row.style.gridTemplateColumns = template;
    row.style.top = i * mx.rowHeight + "px";
    const name = h("div", "fragola-eval-case", cases[c]);
    name.title = cases[c];
    row.append(name);
    for (let v = 0; v < width; v++) row.append(cellNode(mx, c, v, cells[c * width + v], selected));
    rows.push(row);
  }
  const focused = rowsBox.contains(document.activeElement) ? document.activeElement.dataset.at : null;
  rowsBox.replaceChildren(...rows);
  const again = focused && rowsBox.querySelector('.fragola-eval-mark[data-at="' + focused + '"]');
  if (again) again.focus(); // a redraw while a run goes on keeps the keyboard's place
}

function queueRows(mx) {
  if (mx.queued) return;
  mx.queued = true;
  requestAnimationFrame(() => drawRows(mx));
}

function refilter(mx) {
  filter(mx);
  queueRows(mx);
}

// One cell (case × variants + variant) redrawn alone when its row is drawn: the cells
// changed by a patch message, without a redraw of the rest.
function redrawCell(mx, index) {
  const width = variantCount(mx.model);
  const c = Math.floor(index / width), v = index % width;
  const old = mx.rowsBox.querySelector('.fragola-eval-cell[data-cell="' + index + '"]');
  if (!old) return; // not drawn: drawn from `cells` when scrolled to
  const focused = old.contains(document.activeElement) ? document.activeElement.dataset.at : null;
  const next = cellNode(mx, c, v, (mx.model.get("cells") || [])[index], mx.model.get("selected") || []);
  old.replaceWith(next);
  const again = focused && next.querySelector('.fragola-eval-mark[data-at="' + focused + '"]');
  if (again) again.focus();
}

// ↑ / ↓ on a mark: the same mark one row up or down, scrolled into sight (the rows out of
// sight are not in the page, so Tab alone would leave the matrix at the last drawn row).
function stepRows(mx, event) {
  if (event.key !== "ArrowDown" && event.key !== "ArrowUp") return;
  const mark = event.target.closest ? event.target.closest(".fragola-eval-mark") : null;
  const row = mark ? mark.closest(".fragola-eval-row") : null;
  if (!row) return;
  const i = Number(row.dataset.i) + (event.key === "ArrowDown" ? 1 : -1);
  if (i < 0 || i >= mx.shown.length) return;
  event.preventDefault();
  const [, v, r] = mark.dataset.at.split(",");
  const { body, rowHeight } = mx;
  const top = i * rowHeight;
  if (top < body.scrollTop) body.scrollTop = top;
  else if (top + rowHeight > body.scrollTop + body.clientHeight) body.scrollTop = top + rowHeight - body.clientHeight;
  drawRows(mx);
  const next = mx.rowsBox.querySelector('.fragola-eval-mark[data-at="' + mx.shown[i] + "," + v + "," + r + '"]');
  if (next) next.focus();
}

// A click on a mark (or its cell) selects that row, or unselects it when it was selected.
function clickCell(mx, event) {
  const mark = event.target.closest ? event.target.closest(".fragola-eval-mark") : null;
  const cell = mark || (event.target.closest ? event.target.closest(".fragola-eval-cell") : null);
  if (!cell || !mx.link.live) return;
  const target = mark || cell.querySelector(".fragola-eval-mark");
  if (!target) return;
  const at = target.dataset.at.split(",").map(Number);
  const now = mx.model.get("selected") || [];
  mx.model.set("selected", now.join(",") === at.join(",") ? [] : at);
  mx.model.save_changes();
}

function drawDetail(mx) {
  const { detail } = mx;
  const d = mx.model.get("detail") || {};
  if (!d.variant && !d.input) { detail.replaceChildren(); detail.hidden = true; return; }
  detail.hidden = false;
  const parts = [h("div", "fragola-eval-dhead", "case: " + d.input)];
  parts.push(h("div", "fragola-eval-dfacts", d.variant + " · repeat " + (Number(d.repeat) + 1) +
    " · " + d.status + (d.passed === true ? " · passed" : d.passed === false ? " · failed" : "")));
  if (d.answer) parts.push(h("div", "fragola-eval-answer", d.answer));
  if (d.error) parts.push(h("div", "fragola-eval-error", d.error));
  if (d.grades && d.grades.length) {
    const list = h("ul", "fragola-eval-grades");
    for (const g of d.grades) {
      list.append(h("li", g.passed ? "fragola-eval-gpass" : "fragola-eval-gfail",
        (g.passed ? "✓ " : "✗ ") + g.name + (g.raw ? " (" + g.raw + ")" : g.score !== null && g.score !== undefined ? " (" + g.score + ")" : "") +
        (g.reason ? ": " + g.reason : "")));
    }
    parts.push(list);
  }
  const trajectory = trajectorySection(d.trajectory);
  if (trajectory) parts.push(trajectory);
  if (d.note) parts.push(h("div", "fragola-eval-note", d.note));
  parts.push(labelControls(mx.model, d, mx.link.live));
  detail.replaceChildren(...parts);
}

function drawStatus(mx) {
  const why = mx.model.get("detached");
  mx.detached.textContent = why ? "detached: " + why
    : !mx.link.live && mx.link.waited ? "read-only: no kernel; run the cell again to open a row's panel" : "";
}

// -- the kernel's messages ----------------------------------------------------------------------
// What the kernel sends the matrix (custom messages), and which pure function takes them.
export const COMMANDS = Object.freeze({
  live: { by: "update", says: "`{live: true}`: the kernel answers the view's hello (experiment/view.py's live view)" },
  patch: { by: "update", says: "`{do: \"patch\", cells: [[index, cell], ...], flags: [[index, flags or null], ...]}`: the cells that changed while rows finish (evaluate/view.py)" },
});

export const commandOf = (msg) =>
  !msg || typeof msg !== "object" ? null : msg.do === "patch" ? "patch" : msg.live ? "live" : null;

// (state, message) -> state, touching neither the page nor the model; the state is {live,
// cells, flags}: `live` once the kernel answers; a patch puts each cell at its index, and sets
// or (null) drops each cell's flags.
export function update(state, msg) {
  const kind = commandOf(msg);
  if (kind === "live") return state.live ? state : { ...state, live: true };
  if (kind !== "patch") return state;
  const cells = state.cells.slice();
  const flags = { ...state.flags };
  for (const [at, cell] of msg.cells || []) cells[at] = cell;
  for (const [at, flag] of msg.flags || []) {
    if (flag) flags[String(at)] = flag; else delete flags[String(at)];
  }
  return { ...state, cells, flags };
}

// A message from the kernel: `update`'s state made the model's (a patch changes the model's
// cells and flags in place, so a view opened later has them) and drawn.
function onKernel(mx, msg) {
  const cells = mx.model.get("cells") || [];
  const flags = mx.model.get("flags") || {};
  const before = { live: mx.link.live, cells, flags };
  const after = update(before, msg);
  if (after === before) return;
  if (after.live && !before.live) {
    mx.link.live = true;
    mx.drawn = "";
    drawRows(mx);
    drawStatus(mx);
    drawDetail(mx);
  }
  if (after.cells === cells) return;
  const changed = new Set([...(msg.cells || []), ...(msg.flags || [])].map(([at]) => at));
  for (const at of changed) {
    cells[at] = after.cells[at];
    if (String(at) in after.flags) flags[String(at)] = after.flags[String(at)];
    else delete flags[String(at)];
  }
  if (mx.failedBox.checked || mx.changedBox.checked) { refilter(mx); return; } // which rows pass
  for (const at of changed) redrawCell(mx, at);
}

function render({ model, el }) {
  el.classList.add("fragola-eval");
  const mx = { model, el, ...matrixNodes(el), link: { live: false, waited: false }, shown: [],
    drawn: "", queued: false, widths: [], template: "", narrow: false, rowHeight: ROW, cueQueued: false };
  const { more, scroller, body, rowsBox } = mx;
  more.addEventListener("click", () => {
    const atEnd = scroller.scrollLeft + scroller.clientWidth >= scroller.scrollWidth - 1;
    const step = Math.max(scroller.clientWidth * 0.8, 200);
    scroller.scrollBy({ left: atEnd ? -scroller.scrollWidth : step, behavior: "smooth" });
  });
  scroller.addEventListener("scroll", () => queueCue(mx), { passive: true });
  rowsBox.addEventListener("click", (event) => clickCell(mx, event));
  rowsBox.addEventListener("keydown", (event) => stepRows(mx, event));
  body.addEventListener("scroll", () => queueRows(mx), { passive: true });
  const resized = typeof ResizeObserver === "function"
    ? new ResizeObserver(() => { requestAnimationFrame(() => fit(mx)); queueRows(mx); }) : null;
  if (resized) { resized.observe(body); resized.observe(scroller); }
  mx.failedBox.addEventListener("change", () => refilter(mx));
  mx.changedBox.addEventListener("change", () => refilter(mx));

  const onHead = () => { drawHead(mx); refilter(mx); };
  const onCells = () => refilter(mx);
  const onSelected = () => { mx.drawn = ""; queueRows(mx); };
  const onVerdicts = () => { mx.verdicts.replaceChildren(...verdictNodes(model.get("verdicts"))); drawHead(mx); };
  const events = [["change:head", onHead], ["change:cases", onCells], ["change:cells", onCells],
    ["change:selected", onSelected], ["change:detail", () => drawDetail(mx)],
    ["change:detached", () => drawStatus(mx)], ["change:verdicts", onVerdicts],
    ["change:flags", onSelected]];
  for (const [e, f] of events) model.on(e, f);
  onVerdicts();
  filter(mx);
  drawRows(mx);
  drawDetail(mx);
  drawStatus(mx);
  const onMessage = (msg) => onKernel(mx, msg);
  model.on("msg:custom", onMessage);
  model.send({ do: "hello" });
  const waited = setTimeout(() => { mx.link.waited = true; drawStatus(mx); }, 2000);
  return () => {
    clearTimeout(waited);
    if (resized) resized.disconnect();
    model.off("msg:custom", onMessage);
    for (const [e, f] of events) model.off(e, f);
  };
}

export default { render };
