// The evaluation matrix's view (anywidget): cases down, variants across. Everything from a
// model, a grader or a case is set with textContent, never as HTML. Only the rows in sight
// are drawn (an evaluation may have thousands of cases); a click on a cell sets `selected`,
// and the kernel sends that row's `detail` and shows its fork's panel below the matrix.

const ROW = 26; // px: every row is one line high, so the rows in sight follow from scrollTop
const EXTRA = 12; // rows drawn above and below the ones in sight, for a smooth scroll

function h(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

const MARK = { p: "✓", f: "✗", q: "·", r: "◌", s: "■", n: "–" };
const SAYS = { p: "passed", f: "failed", q: "queued", r: "running", s: "stopped", n: "not run" };
const CHANGE = { improved: "▲ improved", regressed: "▼ regressed", new: "new", gone: "gone" };

function percent(rate) {
  return rate === null || rate === undefined ? "–" : Math.round(rate * 100) + "%";
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

function render({ model, el }) {
  el.classList.add("fragola-eval");
  const top = h("div", "fragola-eval-top");
  const tools = h("div", "fragola-eval-tools");
  const failedOnly = h("label", "fragola-eval-filter");
  const failedBox = h("input");
  failedBox.type = "checkbox";
  failedOnly.append(failedBox, h("span", "", " failed only"));
  const changedOnly = h("label", "fragola-eval-filter");
  const changedBox = h("input");
  changedBox.type = "checkbox";
  changedOnly.append(changedBox, h("span", "", " changed only"));
  const count = h("span", "fragola-eval-count");
  tools.append(failedOnly, changedOnly, count);
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
  const detail = h("div", "fragola-eval-detail");
  const detached = h("div", "fragola-eval-detached");
  const verdicts = h("div", "fragola-eval-verdicts");
  el.replaceChildren(top, verdicts, tools, scroller, detail, detached);

  const link = { live: false, waited: false };
  let shown = []; // the case indexes the filters let through
  let drawn = ""; // what the drawn rows show: redraw them only when it changes
  let queued = false;

  // Every row is a grid of its own: the variants' columns get one fixed width (room for a
  // mark per repeat, the score and a change's badge), so the rows line up whatever they hold.
  const columns = (n) => {
    const info = model.get("head") || {};
    const em = Math.max(8.5, (info.repeat || 1) * 1.7 + 3.8 + (info.baseline ? 6.5 : 0));
    return "minmax(9em, 1fr) " + (em.toFixed(1) + "em ").repeat(n).trim();
  };

  function drawHead() {
    const info = model.get("head") || {};
    const variants = info.variants || [];
    top.textContent = "Evaluation · " + (info.title || "");
    head.style.gridTemplateColumns = columns(variants.length);
    const cells = [h("div", "fragola-eval-case", "case")];
    for (const v of variants) {
      const box = h("div", "fragola-eval-vhead");
      box.setAttribute("role", "columnheader");
      box.append(h("bdi", "fragola-eval-vname", v.name));
      const facts = percent(v.rate) + " passed" + (v.cost ? " · " + v.cost : "") +
        (info.done ? "" : " · " + v.ran + "/" + v.rows);
      box.append(h("div", "fragola-eval-vfacts", facts));
      box.append(intervalNode(((model.get("verdicts") || {}).intervals || [])[cells.length - 1]));
      cells.push(box);
    }
    head.replaceChildren(...cells);
    changedOnly.hidden = !info.baseline;
    if (!info.baseline) changedBox.checked = false;
  }

  function filter() {
    const cases = model.get("cases") || [];
    const cells = model.get("cells") || [];
    const width = ((model.get("head") || {}).variants || []).length || 1;
    const failed = failedBox.checked, changed = changedBox.checked;
    shown = [];
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
    count.textContent = (failed || changed ? shown.length + " of " : "") + cases.length + " cases";
    spacer.style.height = shown.length * ROW + "px";
    drawn = "";
  }

  function cellNode(c, v, cell, selected) {
    const box = h("div", "fragola-eval-cell");
    box.setAttribute("role", "cell");
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
      mark.disabled = !link.live;
      mark.dataset.at = c + "," + v + "," + r;
      mark.title = (marks.length > 1 ? "repeat " + (r + 1) + ": " : "") + (SAYS[m] || m) +
        (link.live ? " · open its panel" : "");
      if (isSelected && selected[2] === r) mark.classList.add("fragola-eval-mark-open");
      box.append(mark);
    }
    if (score !== null && score !== undefined) box.append(h("span", "fragola-eval-score", Number(score).toFixed(2)));
    if (change) box.append(h("span", "fragola-eval-change fragola-eval-change-" + change.replace(/[^a-z]/g, ""), CHANGE[change] || change));
    const width = ((model.get("head") || {}).variants || []).length || 1;
    const flags = (model.get("flags") || {})[String(c * width + v)];
    if (flags) flagCell(box, flags, flags[1]);
    return box;
  }

  function drawRows() {
    queued = false;
    const cases = model.get("cases") || [];
    const cells = model.get("cells") || [];
    const width = ((model.get("head") || {}).variants || []).length || 1;
    const selected = model.get("selected") || [];
    const height = body.clientHeight || 400;
    const first = Math.max(0, Math.floor(body.scrollTop / ROW) - EXTRA);
    const last = Math.min(shown.length, Math.ceil((body.scrollTop + height) / ROW) + EXTRA);
    const key = first + ":" + last + ":" + link.live + ":" + selected.join(",");
    if (key === drawn) return;
    drawn = key;
    const template = columns(width);
    const rows = [];
    for (let i = first; i < last; i++) {
      const c = shown[i];
      const row = h("div", "fragola-eval-row");
      row.setAttribute("role", "row");
      row.style.gridTemplateColumns = template;
      row.style.top = i * ROW + "px";
      const name = h("div", "fragola-eval-case", cases[c]);
      name.title = cases[c];
      row.append(name);
      for (let v = 0; v < width; v++) row.append(cellNode(c, v, cells[c * width + v], selected));
      rows.push(row);
    }
    rowsBox.replaceChildren(...rows);
  }

  const queueRows = () => {
    if (queued) return;
    queued = true;
    requestAnimationFrame(drawRows);
  };

  function drawDetail() {
    const d = model.get("detail") || {};
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
          (g.passed ? "✓ " : "✗ ") + g.name + (g.score !== null && g.score !== undefined ? " (" + g.score + ")" : "") +
          (g.reason ? ": " + g.reason : "")));
      }
      parts.push(list);
    }
    if (d.note) parts.push(h("div", "fragola-eval-note", d.note));
    parts.push(labelControls(model, d, link.live));
    detail.replaceChildren(...parts);
  }

  function drawStatus() {
    const why = model.get("detached");
    detached.textContent = why ? "detached: " + why
      : !link.live && link.waited ? "read-only: no kernel; run the cell again to open a row's panel" : "";
  }

  rowsBox.addEventListener("click", (event) => {
    const mark = event.target.closest ? event.target.closest(".fragola-eval-mark") : null;
    const cell = mark || (event.target.closest ? event.target.closest(".fragola-eval-cell") : null);
    if (!cell || !link.live) return;
    const target = mark || cell.querySelector(".fragola-eval-mark");
    if (!target) return;
    const at = target.dataset.at.split(",").map(Number);
    const now = model.get("selected") || [];
    model.set("selected", now.join(",") === at.join(",") ? [] : at);
    model.save_changes();
  });
  body.addEventListener("scroll", queueRows, { passive: true });
  const resized = typeof ResizeObserver === "function" ? new ResizeObserver(queueRows) : null;
  if (resized) resized.observe(body);
  const refilter = () => { filter(); queueRows(); };
  failedBox.addEventListener("change", refilter);
  changedBox.addEventListener("change", refilter);

  const onHead = () => { drawHead(); refilter(); };
  const onCells = () => refilter();
  const onSelected = () => { drawn = ""; queueRows(); };
  const onVerdicts = () => { verdicts.replaceChildren(...verdictNodes(model.get("verdicts"))); drawHead(); };
  const onFlags = () => { drawn = ""; queueRows(); };
  const events = [["change:head", onHead], ["change:cases", onCells], ["change:cells", onCells],
    ["change:selected", onSelected], ["change:detail", drawDetail], ["change:detached", drawStatus],
    ["change:verdicts", onVerdicts], ["change:flags", onFlags]];
  for (const [e, f] of events) model.on(e, f);
  onVerdicts();
  filter();
  drawRows();
  drawDetail();
  drawStatus();
  const onMessage = (msg) => {
    if (msg && msg.live && !link.live) { link.live = true; drawn = ""; drawRows(); drawStatus(); drawDetail(); }
  };
  model.on("msg:custom", onMessage);
  model.send({ do: "hello" });
  const waited = setTimeout(() => { link.waited = true; drawStatus(); }, 2000);
  return () => {
    clearTimeout(waited);
    if (resized) resized.disconnect();
    model.off("msg:custom", onMessage);
    for (const [e, f] of events) model.off(e, f);
  };
}

export default { render };
