// fragola_nb.diff(a, b), a page at a time (see diff/view.py). Text only: textContent, never
// innerHTML (the kernel made every text visible: credentials redacted, controls written out).

function h(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
}

const KINDS = [["changed", () => "changed"], ["only-left", (n) => "only in " + n[0]],
  ["only-right", (n) => "only in " + n[1]], ["same", () => "identical"]];

function side(s) {
  if (!s) return h("div", "fragola-diff-cell fragola-diff-empty");
  const role = String(s.role).replace(/[^a-z]/g, "");
  const cell = h("div", "fragola-diff-cell fragola-diff-" + role);
  cell.dataset.index = s.n;
  const what = h("div", "fragola-diff-role");
  what.append(h("span", "fragola-index", s.n), " · " + s.role);
  if (s.id !== undefined) what.append(" · ", h("span", "", s.id));
  if (s.edited) what.append(" ", h("span", "fragola-edited", "edited by hand"));
  const text = h("div", "fragola-diff-text");
  if (s.words) {
    for (const [op, piece] of s.words) {
      text.append(op === "=" ? piece : h(op === "-" ? "del" : "ins", "", piece));
    }
  } else {
    text.textContent = s.text;
  }
  cell.append(what, text);
  return cell;
}

function pairRow(row, unfolded) {
  const kind = ["same", "changed", "only-left", "only-right"].includes(row.k) ? row.k : "same";
  const line = h("div", "fragola-diff-row fragola-diff-" + kind + (unfolded ? " fragola-diff-unfolded" : ""));
  line.dataset.kind = kind;
  line.append(side(row.l));
  if (kind !== "same") line.append(side(row.r));
  return line;
}

function counts(head, only, redraw) {
  const line = h("div", "fragola-diff-counts");
  const c = head.counts, differ = head.pairs - c.same;
  const total = h("span", "fragola-diff-total", `${head.common.toLocaleString("en-US")} message(s) in common, then ${head.pairs.toLocaleString("en-US")} pair(s): ${differ.toLocaleString("en-US")} differ`);
  total.dataset.differ = differ;
  line.append(total);
  for (const [kind, label] of KINDS) {
    const chip = h("span", "fragola-diff-count fragola-diff-count-" + kind, `${c[kind].toLocaleString("en-US")} ${label(head.names)}`);
    chip.dataset.count = c[kind];
    line.append(chip);
  }
  if (differ) {
    const toggle = h("label", "fragola-diff-toggle");
    const box = h("input", "fragola-diff-only");
    box.type = "checkbox";
    box.checked = only;
    box.addEventListener("change", () => redraw(box.checked));
    toggle.append(box, ` changes only (${differ.toLocaleString("en-US")})`);
    line.append(toggle);
  }
  return line;
}

// The lines in order: each pair that differs, each fold's line, and an unfolded fold's
// messages (or a line saying they are on their way); "changes only" leaves out the rest.
function linesOf(rows, state) {
  const out = [];
  rows.forEach((row, at) => {
    if (row.k !== "fold") {
      if (!(state.only && row.k === "same")) out.push([row, false, at]);
      return;
    }
    if (state.only) return;
    out.push([row, false, at]);
    if (!state.open.has(at)) return;
    const inner = state.got.get(at);
    if (inner) for (const one of inner) out.push([one, true, at]);
    else out.push([{ k: "wait" }, true, at]);
  });
  return out;
}

// Each side's name, length and own spending after the common part.
function headOf(head) {
  const heads = h("div", "fragola-diff-head");
  (head.names || []).forEach((name, i) => {
    const cell = h("div", "", name + " ");
    cell.append(h("span", "fragola-diff-meta", `(${(head.lengths[i] || 0).toLocaleString("en-US")} messages)`));
    if (head.spent[i]) cell.append(h("div", "fragola-diff-meta", head.spent[i]));
    heads.append(cell);
  });
  return heads;
}

// -- the kernel's messages ------------------------------------------------------------------------
// What the kernel sends the diff (a custom message), and the pure function that takes it.
export const COMMANDS = Object.freeze({
  fold: { by: "update", says: "`{fold: at, rows: [...]}`: the messages of the identical run folded at `at`, asked for once by a click on its line (diff/view.py)" },
});

// (state, message) -> state, touching neither the page nor the model: a fold's rows kept in
// `got` (a Map of fold -> rows); any other message leaves the state as it is.
export function update(state, msg) {
  if (!msg || !Number.isInteger(msg.fold) || !Array.isArray(msg.rows)) return state;
  return { ...state, got: new Map(state.got).set(msg.fold, msg.rows) };
}

// -- the view's sections -------------------------------------------------------------------------
// Each takes `v`: {model, state, body, pager, draw}, the one view they draw in.

// A fold's line: a click unfolds it (its messages asked of the kernel once) or folds it again.
function foldLine(v, row, at) {
  const open = v.state.open.has(at);
  const button = h("button", "fragola-diff-fold-line",
    `${open ? "\u25be" : "\u2026"} ${row.count.toLocaleString("en-US")} identical messages (${row.where})`);
  button.type = "button";
  button.dataset.count = row.count;
  button.setAttribute("aria-expanded", String(open));
  button.title = open ? "fold them again" : "show them";
  button.addEventListener("click", () => {
    if (open) v.state.open.delete(at); else v.state.open.add(at);
    if (!open && !v.state.got.has(at)) v.model.send({ unfold: at }); // its messages, once
    v.draw();
  });
  return button;
}

function pageButton(v, label, title, go) {
  const b = h("button", "fragola-diff-page-" + label, label);
  b.type = "button";
  b.title = title;
  b.addEventListener("click", () => { v.state.page = go(); v.draw(); v.body.scrollTop = 0; });
  return b;
}

// The pager: first, previous, where we are, next, last (hidden for one page).
function pagerOf(v, from, shown, total, pages) {
  const last = pages - 1, page = v.state.page;
  const nav = [pageButton(v, "first", "the first page", () => 0),
    pageButton(v, "previous", "the page before", () => page - 1),
    pageButton(v, "next", "the page after", () => page + 1),
    pageButton(v, "last", "the last page", () => last)];
  nav[0].disabled = nav[1].disabled = page === 0;
  nav[2].disabled = nav[3].disabled = page === last;
  const where = h("span", "fragola-diff-where", total
    ? `lines ${(from + 1).toLocaleString("en-US")}\u2013${(from + shown).toLocaleString("en-US")} of ${total.toLocaleString("en-US")} \u00b7 page ${page + 1} of ${pages}`
    : "");
  v.pager.replaceChildren(...nav.slice(0, 2), where, ...nav.slice(2));
  v.pager.hidden = pages === 1;
}

// One page of lines in the body, and the pager under it.
function drawPage(v) {
  const all = linesOf(v.model.get("rows") || [], v.state), size = v.model.get("page_size") || 100;
  const pages = Math.max(1, Math.ceil(all.length / size));
  v.state.page = Math.min(Math.max(0, v.state.page), pages - 1);
  const from = v.state.page * size, part = all.slice(from, from + size);
  v.body.replaceChildren(...part.map(([row, inner, at]) =>
    row.k === "fold" && !inner ? foldLine(v, row, at)
      : row.k === "wait" ? h("div", "fragola-diff-note", "\u2026 (the kernel sends them; run the cell again if it is gone)")
        : pairRow(row, inner)));
  if (!all.length) v.body.replaceChildren(h("div", "fragola-diff-note", "No difference after the common part."));
  pagerOf(v, from, part.length, all.length, pages);
}

function render({ model, el }) {
  el.classList.add("fragola-diff", "fragola-diff-live");
  el.setAttribute("data-lm-suppress-shortcuts", "true");
  const v = { model, state: { only: false, page: 0, open: new Set(), got: new Map() },
    body: h("div", "fragola-diff-body"), pager: h("div", "fragola-diff-pager") };
  v.draw = () => drawPage(v);
  const onMsg = (msg) => {
    const next = update(v.state, msg);
    if (next === v.state) return;
    v.state.got = next.got;
    v.draw();
  };
  model.on("msg:custom", onMsg);
  const setup = () => {
    v.state.got = new Map();
    v.state.open.clear();
    const head = model.get("head") || {};
    const top = counts(head, v.state.only, (only) => { v.state.only = only; v.state.page = 0; v.draw(); });
    el.replaceChildren(headOf(head), top, v.body, v.pager);
    v.draw();
  };
  setup();
  model.on("change:rows", setup);
  model.on("change:head", setup);
  return () => {
    model.off("change:rows", setup);
    model.off("change:head", setup);
    model.off("msg:custom", onMsg);
  };
}

export default { render };
