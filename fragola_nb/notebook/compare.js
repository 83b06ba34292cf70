// The compare grid's view (anywidget): one column per variant. Everything from a model, a
// tool or a person is set with textContent, never as HTML. A click on a column's name sets
// `selected`; the kernel then shows that fork's panel below the grid.

function h(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

const STATUS = { queued: "queued", running: "running", finished: "finished",
  waiting: "waiting for you", step_limit: "step limit", stopped: "stopped",
  not_started: "not started", failed: "failed", cancelled: "cancelled" };

function facts(col) {
  const parts = [];
  // no "0 tokens" while a column waits for its first model call's usage
  const counting = col.status === "running" || col.status === "queued";
  if (col.tokens || (col.tokens === 0 && !counting)) parts.push(col.tokens + " tokens");
  if (col.seconds !== null && col.seconds !== undefined) parts.push(Number(col.seconds).toFixed(2) + " s");
  if (col.calls && col.calls.length) parts.push(col.calls.length + (col.calls.length === 1 ? " tool call" : " tool calls"));
  return parts.join(" · ");
}

function answer(col, first) {
  const box = h("div", "fragola-compare-answer" + (col.streaming ? " fragola-compare-streaming" : ""));
  if (Array.isArray(col.diff) && !first) {
    for (const [kind, text] of col.diff) {
      const cls = kind === "new" ? "fragola-diff-new" : kind === "gone" ? "fragola-diff-gone" : "fragola-diff-same";
      const piece = h(kind === "new" ? "ins" : kind === "gone" ? "del" : "span", cls, text);
      if (kind !== "same") piece.title = kind === "new" ? "not in the first column" : "only in the first column";
      box.append(piece);
    }
  } else {
    box.textContent = col.answer || "";
  }
  return box;
}

function cell(col, index, selected, model, live) {
  const box = h("section", "fragola-compare-col" + (col.name === selected ? " fragola-compare-selected" : ""));
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
  box.append(head);
  const line = facts(col);
  if (line) box.append(h("div", "fragola-compare-facts", line));
  if (col.calls && col.calls.length) {
    const calls = h("ul", "fragola-compare-calls");
    // a no-break space: the arrow stays on the call's first line when the call wraps
    for (const c of col.calls) calls.append(h("li", "", "→\u00a0" + c));
    box.append(calls);
  }
  if (col.answer || col.diff) {
    const text = answer(col, index === 0);
    text.dataset.name = col.name;
    box.append(text);
  }
  if (col.note) box.append(h("div", "fragola-compare-note", col.note));
  if (col.error) box.append(h("div", "fragola-compare-error", col.error));
  return box;
}

function render({ model, el }) {
  el.classList.add("fragola-compare");
  const top = h("div", "fragola-compare-top");
  const grid = h("div", "fragola-compare-grid");
  const legend = h("div", "fragola-compare-legend");
  legend.append(h("span", "", "differences from the first column: "),
    h("ins", "fragola-diff-new", "added"), h("span", "", " "), h("del", "fragola-diff-gone", "left out"));
  const detached = h("div", "fragola-compare-detached");
  el.replaceChildren(top, grid, legend, detached);
  // Live once the kernel answers the view's hello; a grid reopened from a saved notebook
  // (no kernel) gets no answer and says it is read-only after a moment.
  const link = { live: false, waited: false };
  const draw = () => {
    const title = model.get("title") || {};
    const cols = model.get("columns") || [];
    top.textContent = (title.agent || "") + " · " + cols.length + " variant(s)" +
      (title.done ? "" : " · running") + ": " + (title.message || "");
    const left = grid.scrollLeft;
    // Each answer scrolls in its column: a redraw keeps where the reader was, and a
    // streaming answer read at its end follows what comes.
    const where = new Map();
    for (const a of grid.querySelectorAll(".fragola-compare-answer")) {
      where.set(a.dataset.name, { top: a.scrollTop, end: a.scrollTop + a.clientHeight >= a.scrollHeight - 4 });
    }
    const selected = model.get("selected");
    grid.replaceChildren(...cols.map((c, i) => cell(c, i, selected, model, link.live)));
    grid.scrollLeft = left;
    for (const a of grid.querySelectorAll(".fragola-compare-answer")) {
      const was = where.get(a.dataset.name);
      const streaming = a.classList.contains("fragola-compare-streaming");
      a.scrollTop = streaming && (!was || was.end) ? a.scrollHeight : was ? was.top : 0;
    }
    legend.hidden = !cols.some((c, i) => i > 0 && Array.isArray(c.diff));
    const why = model.get("detached");
    detached.textContent = why ? "detached: " + why
      : !link.live && link.waited ? "read-only: no kernel; run the cell again to open a branch's panel" : "";
  };
  draw();
  const events = ["change:columns", "change:title", "change:selected", "change:detached"];
  for (const e of events) model.on(e, draw);
  const onMessage = (msg) => {
    if (msg && msg.live && !link.live) { link.live = true; draw(); }
  };
  model.on("msg:custom", onMessage);
  model.send({ do: "hello" });
  const waited = setTimeout(() => { link.waited = true; draw(); }, 2000);
  return () => {
    clearTimeout(waited);
    model.off("msg:custom", onMessage);
    for (const e of events) model.off(e, draw);
  };
}

export default { render };
