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
  el.replaceChildren(top, tools, scroller, detail, detached);

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
          (g.passed ? "✓ " : "✗ ") + g.name + (g.raw ? " (" + g.raw + ")" : g.score !== null && g.score !== undefined ? " (" + g.score + ")" : "") +
          (g.reason ? ": " + g.reason : "")));
      }
      parts.push(list);
    }
    if (d.note) parts.push(h("div", "fragola-eval-note", d.note));
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
  const events = [["change:head", onHead], ["change:cases", onCells], ["change:cells", onCells],
    ["change:selected", onSelected], ["change:detail", drawDetail], ["change:detached", drawStatus]];
  for (const [e, f] of events) model.on(e, f);
  drawHead();
  filter();
  drawRows();
  drawDetail();
  drawStatus();
  const onMessage = (msg) => {
    if (msg && msg.live && !link.live) { link.live = true; drawn = ""; drawRows(); drawStatus(); }
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
