// The agent panel's view (anywidget). Everything from a model, a tool or a person is set with
// textContent; the only HTML is a row's `html`, made by fragola_nb's renderers (escaped text,
// or Markdown with raw HTML off), and it is cleaned again here against a short allowlist.
//
// The rows arrive as custom messages ({t: "rows"} and {t: "stream"}: COMMANDS, at the end, lists
// what the kernel sends); the pure `update` keeps them for every view of the panel, and they are
// copied to `saved_rows` (not sent to the kernel) so a notebook saved with its widget state
// shows them without a kernel. The list is windowed: only the rows near the viewport are in the
// DOM. A view is built from sections (headerSection, messagesSection, ...), each its nodes and
// what draws them.

const ROW_ESTIMATE = 64; // px, until a row is measured
const OVERSCAN = 600; // px drawn above and below the viewport
const STICK = 40; // px from the bottom that still counts as "at the bottom"
const LONG = 3000; // characters: a longer message is shown clamped, with "show all"
const ICONS = { asked: "…", ran: "✓", error: "✗", rejected: "⊘", edited: "✎", amended: "✎",
  injected: "✍", cancelled: "■" };
const STATES = { asked: "waiting", ran: "ran", error: "error", rejected: "rejected",
  edited: "ran with edited arguments", amended: "result edited by hand, not what the tool returned",
  injected: "answered by hand", cancelled: "cancelled" };
const TAGS = new Set(["P", "EM", "STRONG", "S", "DEL", "CODE", "PRE", "A", "UL", "OL", "LI",
  "BLOCKQUOTE", "H1", "H2", "H3", "H4", "H5", "H6", "HR", "BR", "TABLE", "THEAD", "TBODY", "TR",
  "TH", "TD", "DIV", "SPAN"]);
const SAFE_HREF = /^(https?:\/\/|mailto:)/i;

function h(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function button(label, cls, title) {
  const b = h("button", "fragola-button " + cls, label);
  b.type = "button";
  if (title) b.title = title;
  return b;
}

// Keep only the tags and attributes our renderers make; links open in a new tab that cannot
// reach back, and only web and mail links stay links.
function clean(root) {
  for (const node of [...root.querySelectorAll("*")]) {
    if (!TAGS.has(node.tagName)) {
      node.replaceWith(document.createTextNode(node.textContent));
      continue;
    }
    for (const attr of [...node.attributes]) {
      const keep = (attr.name === "class" && /^(fragola-text|language-[\w+-]+)$/.test(attr.value))
        || (attr.name === "href" && node.tagName === "A" && SAFE_HREF.test(attr.value.trim()))
        || (attr.name === "start" && node.tagName === "OL")
        || (attr.name === "style" && /^text-align:(left|right|center)$/.test(attr.value));
      if (!keep) node.removeAttribute(attr.name);
    }
    if (node.tagName === "A") {
      if (node.hasAttribute("href")) {
        node.target = "_blank";
        node.rel = "noopener noreferrer";
        node.title = node.getAttribute("href");
      } else {
        node.replaceWith(document.createTextNode(node.textContent));
      }
    }
  }
  for (const pre of root.querySelectorAll("pre")) {
    const box = h("div", "fragola-code");
    pre.replaceWith(box);
    const copy = button("copy", "fragola-copy", "copy this code");
    copy.addEventListener("click", () => {
      const done = () => { copy.textContent = "copied"; setTimeout(() => { copy.textContent = "copy"; }, 1200); };
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(pre.textContent).then(done, () => select(pre));
      } else {
        select(pre);
      }
    });
    box.append(copy, pre);
  }
}

function select(node) {
  const range = document.createRange();
  range.selectNodeContents(node);
  const sel = window.getSelection();
  sel.removeAllRanges();
  sel.addRange(range);
}

function seconds(ms) {
  if (ms === null || ms === undefined) return "";
  return ms < 1000 ? ms + " ms" : (ms / 1000).toFixed(1) + " s";
}

function callEl(call) {
  const state = ICONS[call.state] ? call.state : "asked";
  const box = h("details", "fragola-call fragola-call-" + state);
  box.dataset.callId = call.id;
  const line = h("summary", "fragola-call-line");
  line.append(h("span", "fragola-call-icon", ICONS[state]), h("bdi", "fragola-call-name", call.name));
  line.append(h("span", "fragola-call-args", "(" + call.args + ")"));
  let what = STATES[state];
  if (call.note) what += ": " + call.note;
  line.append(h("span", "fragola-call-state", what));
  if (call.state !== "asked" && call.result) {
    const brief = call.result.replace(/\s+/g, " ");
    line.append(h("span", "fragola-call-result", "→ " + (brief.length > 80 ? brief.slice(0, 79) + "…" : brief)));
  }
  if (call.ms !== null && call.ms !== undefined) line.append(h("span", "fragola-call-ms", seconds(call.ms)));
  if (call.flag) line.append(h("span", "fragola-flag", "⚠ direction-control characters"));
  box.append(line);
  if (call.full) {
    box.append(h("div", "fragola-call-label", "arguments"), h("pre", "fragola-args", call.full));
  }
  if (call.state !== "asked") { // the result is a message of its own: its number
    const label = h("div", "fragola-call-label", "result");
    if (call.ri !== null && call.ri !== undefined) label.append(" ", numberEl(call.ri));
    box.append(label, h("pre", "fragola-result-text", call.result));
  }
  return box;
}

// A long text of a row shows its start; the rest on demand.
function clampLong(node, part) {
  const length = part.textContent.length;
  if (length <= LONG) return;
  const all = "show all " + length.toLocaleString() + " characters";
  part.classList.add("fragola-clamped");
  const more = button(all, "fragola-more");
  more.addEventListener("click", () => {
    more.textContent = part.classList.toggle("fragola-clamped") ? all : "show less";
    node.dispatchEvent(new Event("toggle")); // the window measures the row again
  });
  node.append(more);
}

// A message's number: its index in the history, as state.messages[i], fork(at=i) and edit(i)
// take it, and as every other view (the diff, the tree, the exports) writes it.
function numberEl(i) {
  const number = h("span", "fragola-index", "#" + i);
  number.title = "message " + i + ": agent.state.messages[" + i + "]";
  return number;
}

function rowEl(row, decorate) {
  const role = String(row.role).replace(/[^a-z]/g, "") || "other";
  const node = h("div", "fragola-msg fragola-msg-" + role);
  node.dataset.index = row.i;
  node.dataset.k = row.k;
  const label = h("div", "fragola-role");
  label.append(numberEl(row.i), " · " + row.role);
  if (row.edited) { // agent.edit put a person's text here (the model is sent the text alone)
    label.append(" ", h("span", "fragola-edited", "edited by hand"));
  }
  node.append(label);
  if (row.html || row.md) {
    const body = h("div", role === "assistant" ? "fragola-md" : "fragola-body");
    if (row.html) {
      body.innerHTML = row.html;
      clean(body);
    } else { // its Markdown is on the way (asked for when drawn): the text meanwhile
      body.classList.add("fragola-md-pending");
      body.textContent = row.text;
    }
    node.append(body);
    clampLong(node, body);
  }
  if (row.refusal) node.append(h("div", "fragola-refusal", "refused: " + row.refusal));
  if (row.rejected) { // a guard's reason can be as long as the message it quotes
    const line = h("div", "fragola-refusal fragola-rejected", row.rejected);
    node.append(line);
    clampLong(node, line);
  }
  for (const call of row.calls || []) node.append(callEl(call));
  if (decorate) decorate(node, row); // the message's own controls, and its open editor
  return node;
}

// The messages: a scrolling box whose rows near the viewport are drawn, between two spacers
// as tall as the rows above and below (measured once drawn, estimated before). Exported for
// the browser unit tests (tests/browser/test_browser_js_units.py).
export class Window {
  constructor(store, scroller, request) {
    this.store = store;
    this.request = request; // asks the kernel for the Markdown of rows drawn without it
    this.scroller = scroller;
    this.top = h("div", "fragola-spacer");
    this.list = h("div", "fragola-rows");
    this.bottom = h("div", "fragola-spacer");
    scroller.append(this.top, this.list, this.bottom);
    this.heights = [];
    this.offsets = [0];
    this.dirtyFrom = 0;
    this.drawn = new Map(); // k -> node
    this.decorate = null; // (node, row) => adds a row's controls (set by the view)
    this.sticky = true;
    this.frame = 0;
    this.held = false; // hold(): draws wait for release()
    this.due = false; // a draw asked for while held
    scroller.addEventListener("scroll", () => {
      this.sticky = scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < STICK;
      this.schedule();
    });
    this.list.addEventListener("toggle", () => this.schedule(), true);
  }

  schedule() {
    if (this.held) { this.due = true; return; }
    if (!this.frame) this.frame = requestAnimationFrame(() => { this.frame = 0; this.drawUnlessHeld(); });
  }

  // A frame asked for before a hold() comes after it: it waits for release() too (two rows
  // messages in one frame, the second clearing a stream, drew its row beside the stream).
  drawUnlessHeld() {
    if (this.held) { this.due = true; return; }
    this.draw();
  }

  // While a streamed reply ends, its stored row is not drawn: the stream's last text is painted
  // first (a small change), then the row replaces it in one frame (a large one: a 120 KB reply
  // takes its own 50 ms), never both on screen at once.
  hold() { this.held = true; }

  release() {
    this.held = false;
    if (this.due) { this.due = false; this.draw(); }
  }

  reset() {
    this.heights = [];
    this.offsets = [0];
    this.dirtyFrom = 0;
    for (const node of this.drawn.values()) node.remove();
    this.drawn.clear();
    this.sticky = true;
  }

  changed(rows) { // rows drawn again (a tool result reached their call)
    for (const row of rows) {
      const old = this.drawn.get(row.k);
      if (old) {
        const node = rowEl(row, this.decorate);
        old.replaceWith(node);
        this.drawn.set(row.k, node);
      }
    }
    this.schedule();
  }

  offset(i) {
    const rows = this.store.rows.length;
    if (this.dirtyFrom < rows || this.offsets.length !== rows + 1) {
      const o = this.offsets;
      for (let j = Math.max(this.dirtyFrom, 0); j < rows; j++) o[j + 1] = o[j] + (this.heights[j] || ROW_ESTIMATE);
      o.length = rows + 1;
      this.dirtyFrom = rows;
    }
    return this.offsets[i];
  }

  find(y) { // the first row whose bottom is below y
    let lo = 0, hi = this.store.rows.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.offset(mid + 1) <= y) lo = mid + 1; else hi = mid;
    }
    return lo;
  }

  draw() {
    const rows = this.store.rows, n = rows.length, sc = this.scroller;
    const view = sc.clientHeight || 400;
    const total = this.offset(n);
    let y = this.sticky ? Math.max(0, total - view) : sc.scrollTop;
    const a = Math.max(0, this.find(y - OVERSCAN));
    const b = Math.min(n, this.find(y + view + OVERSCAN) + 1);
    for (const [k, node] of this.drawn) {
      if (k < a || k >= b) { node.remove(); this.drawn.delete(k); }
    }
    let before = null;
    const pending = [];
    for (let k = b - 1; k >= a; k--) { // insert in order, from the end
      let node = this.drawn.get(k);
      if (!node) {
        if (!rows[k]) continue;
        node = rowEl(rows[k], this.decorate);
        this.drawn.set(k, node);
        this.list.insertBefore(node, before);
        if (rows[k].md) pending.push(k);
      }
      before = node;
    }
    if (pending.length) this.request(pending);
    // measure what is drawn; keep the first visible row where it was (unless at the bottom)
    const anchor = this.sticky ? -1 : this.find(sc.scrollTop);
    const anchorShift = anchor >= 0 ? sc.scrollTop - this.offset(anchor) : 0;
    let moved = false;
    for (const [k, node] of this.drawn) {
      const height = node.offsetHeight;
      if (height && height !== this.heights[k]) {
        this.heights[k] = height;
        this.dirtyFrom = Math.min(this.dirtyFrom, k);
        moved = true;
      }
    }
    this.top.style.height = this.offset(a) + "px";
    this.bottom.style.height = Math.max(0, this.offset(n) - this.offset(b)) + "px";
    if (this.sticky) {
      sc.scrollTop = sc.scrollHeight;
    } else if (moved && anchor >= 0) {
      const want = this.offset(anchor) + anchorShift;
      if (Math.abs(want - sc.scrollTop) > 1) sc.scrollTop = want;
    }
  }
}

function statusText(strip) {
  if (!strip || !strip.text) return "";
  if (strip.kind === "throttled" && strip.until) {
    // a 429 waited out: count down to the retry, then the call is under way again
    const left = Math.ceil(strip.until - Date.now() / 1000);
    if (left > 0) return "throttled, retrying in " + left + " s";
    return String(strip.after || "") + " " + Math.max(0, Math.floor(Date.now() / 1000 - strip.t0)) + " s";
  }
  if ((strip.kind === "model" || strip.kind === "tool") && strip.t0) {
    const secs = Math.max(0, Math.floor(Date.now() / 1000 - strip.t0));
    return strip.text + " " + secs + " s";
  }
  return strip.text;
}

// The static copy the kernel shows beside a live view (static/copy.py: the next output, for
// nbconvert and a notebook opened without a kernel) hides itself by CSS where a live view is;
// once this view is in the page, its text goes too, here and each time JupyterLab draws the
// copy again (its update at the end of a turn), so the page holds the conversation once.
function dropStaticCopies(el) {
  let tries = 0;
  const start = () => {
    const area = el.isConnected ? el.closest(".jp-OutputArea") : null;
    if (!area) {
      if (++tries < 50) setTimeout(start, 100);
      return;
    }
    const drop = () => {
      for (const copy of area.querySelectorAll(".fragola-static-copy")) {
        if (copy.firstChild) copy.replaceChildren();
      }
    };
    drop();
    const watch = new MutationObserver((records) => {
      if (!el.isConnected) { watch.disconnect(); return; } // this view is gone (a re-run)
      for (const record of records) {
        if (el.contains(record.target)) continue; // the view's own rows: never a copy
        for (const node of record.addedNodes) {
          if (node.nodeType === 1 && (node.matches(".fragola-static-copy")
              || node.querySelector(".fragola-static-copy"))) { drop(); return; }
        }
      }
    });
    watch.observe(area, { childList: true, subtree: true });
  };
  start();
}

// -- the view, section by section ---------------------------------------------------------------
// A view is built from sections; each makes its nodes and the functions that draw them. They
// share the view's context `v`: {store, model, el, send, live(), generating(), cleanups,
// drawControls()} and, once the messages section is made, `win` and `scroller`.

function headerSection(v) {
  const header = h("div", "fragola-header");
  const name = h("bdi", "fragola-name");
  const badge = h("span", "fragola-status");
  const facts = h("span", "fragola-facts");
  const instructions = h("details", "fragola-instructions");
  const instructionsText = h("pre", "fragola-instructions-text");
  instructions.append(h("summary", "", "instructions"), instructionsText);
  header.append(name, badge, facts);
  const draw = () => {
    const head = v.model.get("head") || {};
    name.textContent = head.name || "";
    const status = String(head.status || "").replace(/[^a-z]/g, "");
    badge.textContent = status;
    badge.className = "fragola-status fragola-status-" + status;
    const parts = [head.id, "model " + (head.model || "")];
    if (head.fork_of) parts.push("fork of " + (head.fork_of_name ? head.fork_of_name + " " : "") + head.fork_of);
    parts.push("steps " + head.steps + "/" + head.max_step);
    // "1,234 tokens · $0.0012": the kernel writes the line (cost only when known); its
    // counts go in the tooltip. Before the first model call there is none.
    const u = head.usage || {};
    if (u.text) parts.push((head.turn ? "this turn: " : "") + u.text);
    facts.title = u.text ? "prompt " + (u.prompt_tokens || 0) + " · completion " +
      (u.completion_tokens || 0) + " · requests " + (u.requests || 0) +
      (u.cached_calls ? " · cached " + u.cached_calls + " (free)" : "") : "";
    facts.textContent = parts.join(" · ");
    instructions.hidden = !head.instructions;
    instructionsText.textContent = head.instructions || "";
    v.drawControls();
  };
  return { nodes: [header, instructions], draw };
}

// The status strip (its clock ticks while a call runs) and the notice under it.
function stripSection(v) {
  const strip = h("div", "fragola-strip");
  strip.setAttribute("role", "status");
  const notice = h("div", "fragola-notice");
  notice.setAttribute("role", "alert");
  const drawStrip = () => {
    const s = v.model.get("strip") || {};
    strip.className = "fragola-strip fragola-strip-" + String(s.kind || "").replace(/[^a-z_]/g, "");
    strip.textContent = statusText(s);
  };
  const ticker = setInterval(() => {
    const s = v.model.get("strip") || {};
    if (s.kind === "model" || s.kind === "tool" || s.kind === "throttled") drawStrip();
  }, 1000);
  v.cleanups.push(() => clearInterval(ticker));
  const drawNotice = () => {
    const n = v.model.get("notice") || {};
    notice.replaceChildren();
    notice.className = "fragola-notice" + (n.kind ? " fragola-notice-" + n.kind : "");
    if (!n.text) return;
    const dismiss = button("×", "fragola-dismiss", "hide this message");
    dismiss.addEventListener("click", () => notice.replaceChildren());
    notice.append(h("span", "fragola-notice-text", n.text), dismiss);
  };
  return { strip, notice, drawStrip, drawNotice };
}

// The messages: the windowed rows, the streamed reply below them, and "↓ newest".
function messagesSection(v) {
  const { store } = v;
  const scroller = h("div", "fragola-messages");
  scroller.tabIndex = 0;
  const win = new Window(store, scroller, (ks) => {
    const fresh = ks.filter((k) => !store.asked.has(k));
    if (!fresh.length || !store.live || store.disconnected) return;
    store.ask(fresh);
    v.send({ do: "render", ks: fresh });
  });
  const streamBox = h("div", "fragola-msg fragola-msg-assistant fragola-stream");
  const streamLabel = h("div", "fragola-role", "assistant · streaming…");
  const streamText = h("div", "fragola-stream-text");
  streamBox.append(streamLabel, streamText);
  const jump = button("↓ newest", "fragola-jump", "scroll to the newest message");
  const node = h("div", "fragola-messages-box");
  node.append(scroller, jump);
  jump.addEventListener("click", () => { win.sticky = true; win.drawUnlessHeld(); });
  scroller.addEventListener("scroll", () => { jump.hidden = win.sticky; });
  jump.hidden = true;

  // A stream that ends (cleared: its stored row is on the way) stays on screen for the frame
  // that paints its last text; the frame after, it goes and the rows held meanwhile are drawn.
  let ending = false;
  const drawStream = () => {
    const shown = Boolean(store.stream) || store.stopped;
    if (!shown) {
      if (!streamBox.isConnected || ending) return;
      ending = true;
      win.hold();
      requestAnimationFrame(() => requestAnimationFrame(() => {
        if (ending) { ending = false; streamBox.remove(); }
        win.release();
      }));
      return;
    }
    ending = false;
    streamText.textContent = store.stream;
    streamLabel.textContent = store.stopped ? "assistant · (stopped — not saved)" : "assistant · streaming…";
    streamBox.classList.toggle("fragola-stream-stopped", store.stopped);
    if (!streamBox.isConnected) scroller.append(streamBox);
    if (win.sticky) scroller.scrollTop = scroller.scrollHeight;
  };
  v.win = win;
  v.scroller = scroller;
  return { node, drawStream };
}

function cardEl(v, card) {
  const box = h("div", "fragola-card");
  box.dataset.callId = card.raw_id;
  const line = h("div", "fragola-card-line");
  const summary = h("span", "fragola-card-summary");
  summary.append(h("bdi", "fragola-card-name", card.name), h("span", "fragola-card-args", "(" + card.args + ")"),
    h("span", "fragola-card-why", card.dynamic ? "waits for a result (dynamic tool)" : "needs your approval"));
  const approve = button("Approve", "fragola-approve fragola-primary", "run " + card.name + " as asked");
  const reject = button("Reject", "fragola-reject", "tell the model it may not run this");
  const editToggle = button("Edit arguments", "fragola-edit-toggle");
  const answerToggle = button("Answer by hand", "fragola-answer-toggle");
  const buttons = h("span", "fragola-card-buttons");
  if (!card.dynamic) buttons.append(approve);
  buttons.append(reject);
  if (!card.dynamic) buttons.append(editToggle);
  buttons.append(answerToggle);
  line.append(summary, buttons);
  box.append(line);
  if (card.flag) {
    box.append(h("div", "fragola-flag fragola-card-flag",
      "⚠ this text contains direction-control or invisible characters (shown as \\u escapes): it may not read as it runs"));
  }
  const full = h("details", "fragola-card-full");
  full.append(h("summary", "", "full arguments"), h("pre", "fragola-args", card.full));
  box.append(full);
  const form = (cls, field, submitLabel, submitCls) => {
    const f = h("div", "fragola-card-form " + cls);
    f.hidden = true;
    const submit = button(submitLabel, submitCls);
    f.append(field, submit);
    box.append(f);
    return [f, submit];
  };
  const reason = h("input", "fragola-reason");
  reason.placeholder = "why not? (the model reads this)";
  const [rejectForm, rejectSubmit] = form("fragola-reject-form", reason, "Send rejection", "fragola-reject-send");
  const edit = h("textarea", "fragola-args-edit");
  edit.value = card.full;
  edit.rows = Math.min(10, card.full.split("\n").length + 1);
  const [editForm, editSubmit] = form("fragola-edit-form", edit, "Approve edited arguments", "fragola-edit-approve");
  const answer = h("textarea", "fragola-inject-text");
  answer.placeholder = "the tool's result, typed by hand";
  const [answerForm, answerSubmit] = form("fragola-answer-form", answer, "Send result", "fragola-inject");
  const error = h("div", "fragola-card-error");
  error.setAttribute("role", "alert");
  box.append(error);
  const decided = h("div", "fragola-card-decided");
  box.append(decided);
  const open = (which, focus) => {
    for (const f of [rejectForm, editForm, answerForm]) f.hidden = f !== which || !f.hidden;
    if (!which.hidden) focus.focus();
  };
  const act = (b, message) => b.addEventListener("click", () => {
    if (box.dataset.busy) return; // one click is one decision
    box.dataset.busy = "1";
    setBusy(true);
    v.send({ id: card.raw_id, ...message() });
    // the kernel answers by changing the card; if nothing comes, the buttons come back
    setTimeout(() => { if (box.dataset.busy) { delete box.dataset.busy; setBusy(false); } }, 5000);
  });
  const setBusy = (busy) => {
    for (const b of box.querySelectorAll("button")) b.disabled = busy || !v.live() || Boolean(box.dataset.decided);
  };
  reject.addEventListener("click", () => open(rejectForm, reason));
  editToggle.addEventListener("click", () => open(editForm, edit));
  answerToggle.addEventListener("click", () => open(answerForm, answer));
  act(approve, () => ({ do: "approve" }));
  act(rejectSubmit, () => ({ do: "reject", reason: reason.value }));
  act(editSubmit, () => ({ do: "edit", args: edit.value }));
  act(answerSubmit, () => ({ do: "inject", text: answer.value }));
  reason.addEventListener("keydown", (e) => { if (e.key === "Enter") rejectSubmit.click(); });
  const update = (c) => {
    delete box.dataset.busy;
    error.textContent = c.error || "";
    if (c.decided) {
      box.dataset.decided = c.decided;
      box.classList.add("fragola-card-done");
      decided.textContent = "✓ " + c.name + "(" + c.args + ") — " + c.decided;
    }
    setBusy(false);
  };
  update(card);
  return { box, update, refresh: () => setBusy(Boolean(box.dataset.busy)) };
}

// The approval cards, and a turn panel's cards once answered: what was decided, and by whom.
function cardsSection(v) {
  const node = h("div", "fragola-cards");
  const cards = new Map();
  const decisions = h("div", "fragola-decisions");
  const drawCards = () => {
    const list = v.model.get("cards") || [];
    const ids = new Set(list.map((c) => c.raw_id));
    for (const [id, card] of cards) if (!ids.has(id)) { card.box.remove(); cards.delete(id); }
    for (const c of list) {
      let card = cards.get(c.raw_id);
      if (!card) { card = cardEl(v, c); cards.set(c.raw_id, card); node.append(card.box); }
      card.update(c);
    }
  };
  const drawDecisions = () => {
    const list = v.model.get("decisions") || [];
    decisions.replaceChildren(...list.map((d) => {
      const line = h("div", "fragola-decision fragola-decision-" + String(d.kind || "").replace(/[^a-z]/g, ""));
      line.textContent = (d.kind === "reject" ? "✗ " : "✓ ") + d.name + "(" + d.args + ") — " + d.text;
      return line;
    }));
  };
  const refresh = () => { for (const card of cards.values()) card.refresh(); };
  return { node, decisions, drawCards, drawDecisions, refresh };
}

// The buttons (Stop, Step, Reset, Fork, Bind), the message box, and the lines that say why
// the controls are off. `refreshers` redraw the other sections' controls: (on, status).
function controlsSection(v, refreshers) {
  const stop = button("Stop", "fragola-stop", "stop the run (the history stays valid)");
  const step = button("Step", "fragola-step", "run the next step");
  const reset = button("Reset", "fragola-reset", "clear the history and the step count");
  const forkName = h("input", "fragola-fork-name");
  forkName.placeholder = "fork name (optional)";
  const fork = button("Fork", "fragola-fork", "fork the agent here; the fork gets a variable");
  const bindName = h("input", "fragola-bind-name");
  bindName.placeholder = "variable";
  const bind = button("Bind", "fragola-bind", "bind this agent to a notebook variable");
  const node = h("div", "fragola-controls");
  const group = (...parts) => { const g = h("span", "fragola-group"); g.append(...parts); return g; };
  node.append(group(stop, step, reset), group(forkName, fork), group(bindName, bind));
  const chat = h("div", "fragola-chat");
  const input = h("textarea", "fragola-chat-input");
  input.rows = 2;
  input.placeholder = "Message the agent (Enter sends, Shift+Enter: new line)";
  input.setAttribute("aria-label", "message to the agent");
  const sendButton = button("Send", "fragola-send", "send this message and run the turn");
  chat.append(input, sendButton);
  const offline = h("div", "fragola-offline");
  const detached = h("div", "fragola-detached");

  stop.addEventListener("click", () => v.send({ do: "stop" }));
  step.addEventListener("click", () => v.send({ do: "step" }));
  let confirmTimer = 0;
  const unconfirm = () => {
    clearTimeout(confirmTimer);
    delete reset.dataset.confirm;
    reset.textContent = "Reset";
    reset.classList.remove("fragola-confirm");
  };
  reset.addEventListener("click", () => {
    if (!reset.dataset.confirm) { // the first click asks
      reset.dataset.confirm = "1";
      reset.textContent = "Really reset?";
      reset.classList.add("fragola-confirm");
      confirmTimer = setTimeout(unconfirm, 4000);
      return;
    }
    unconfirm();
    v.send({ do: "reset" });
  });
  v.cleanups.push(() => clearTimeout(confirmTimer));
  fork.addEventListener("click", () => { v.send({ do: "fork", name: forkName.value }); forkName.value = ""; });
  bind.addEventListener("click", () => v.send({ do: "bind", var: bindName.value }));
  const sendMessage = () => {
    if (sendButton.disabled) return;
    const text = input.value;
    if (!text.trim()) return;
    v.send({ do: "send", text });
    input.value = "";
  };
  sendButton.addEventListener("click", sendMessage);
  input.addEventListener("keydown", (e) => {
    e.stopPropagation();
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); sendMessage(); }
  });

  const draw = () => {
    const head = v.model.get("head") || {};
    const status = head.status;
    const on = v.live();
    stop.disabled = !on || (status === "idle" && !head.experiment);
    step.disabled = !on || status === "generating";
    reset.disabled = !on || status !== "idle";
    fork.disabled = forkName.disabled = !on || status === "generating";
    bind.disabled = bindName.disabled = !on;
    for (const refresh of refreshers) refresh(on, status);
    sendButton.disabled = !on || status !== "idle";
    input.disabled = !on;
    v.el.classList.toggle("fragola-inactive", !on);
    const why = v.model.get("detached");
    detached.textContent = why ? "detached: " + why : "";
    offline.textContent = !v.store.live && v.store.waited
      ? "No kernel holds this agent (a saved notebook, or a restarted kernel): the conversation is shown read-only and the controls are off. Run the notebook again to use them."
      : "";
  };
  return { node, chat, offline, detached, draw };
}

// A waterfall: the turn's length split into model, tools and between calls (a stacked bar
// and its legend), then one row per model or tool call, its bar placed by start and length
// on the turn's span, the time between calls before it hatched; at most TIMELINE_SHOWN
// rows, in order or slowest first, the rest folded behind one line, in a box of bounded
// height. Every text is textContent or a title.
const TIMELINE_SHOWN = 30;
const tlDuration = (s) => (s < 1 ? Math.round(s * 1000) + " ms" : s.toFixed(2) + " s");
const tlKind = (k) => String(k || "").replace(/[^a-z]/g, "");

// A turn's timeline: its summary holds the turn's length and parts; the rest exists only
// while it is open; the order and the unfolded tail stay as the person set them.
function timelineSection(v) {
  const node = h("details", "fragola-timeline");
  const summary = h("summary", "fragola-timeline-summary");
  const body = h("div", "fragola-timeline-body");
  node.append(summary, body);
  const view = { slowest: false, all: false };
  const draw = () => {
    const t = v.model.get("timeline") || {};
    const bars = Array.isArray(t.bars) ? t.bars : [];
    node.hidden = !bars.length;
    summary.textContent = "timeline" + (t.summary ? " · " + t.summary : "");
    if (!node.open) { body.replaceChildren(); return; }
    const old = body.querySelector(".fragola-timeline-bars");
    const scrolled = old ? old.scrollTop : 0;
    const active = document.activeElement;
    const focused = active && body.contains(active) ? active.className.split(" ").pop() : "";
    const parts = Array.isArray(t.parts) ? t.parts : [];
    const rows = timelineRows(t, bars, view, draw);
    body.replaceChildren(...(parts.length ? [timelineSplit(t, parts)] : []),
      ...(bars.length > 1 ? [timelineOrder(view, draw)] : []), ...rows);
    rows[0].scrollTop = scrolled;
    const again = focused && body.querySelector("." + focused);
    if (again) again.focus(); // a redraw while the turn runs keeps the keyboard's place
  };
  node.addEventListener("toggle", draw);
  return { node, draw };
}

function timelineSplit(t, parts) {
  const span = Math.max(Number(t.span) || 0, 1e-9);
  const stack = h("div", "fragola-tl-stack");
  stack.setAttribute("role", "img");
  stack.setAttribute("aria-label", "the turn, " + (t.turn || "") + ": " +
    parts.map((p) => p.label + " " + p.text).join(", "));
  const legend = h("div", "fragola-tl-legend");
  legend.append(h("span", "fragola-tl-turn", "turn " + (t.turn || "")));
  for (const p of parts) {
    const cls = "fragola-tl-part-" + tlKind(p.kind);
    const seg = h("div", "fragola-tl-seg " + cls);
    seg.style.width = Math.max(0, Math.min(100, (100 * (Number(p.seconds) || 0)) / span)) + "%";
    seg.title = p.title || "";
    stack.append(seg);
    const key = h("span", "fragola-tl-key " + cls);
    key.title = p.title || "";
    key.append(h("span", "fragola-tl-swatch"), h("span", "fragola-tl-key-text", p.label + " " + p.text));
    legend.append(key);
  }
  const between = parts.find((p) => p.kind === "between");
  const box = h("div", "fragola-tl-split");
  box.append(stack, legend);
  if (between && between.what) box.append(h("div", "fragola-tl-note", "between calls: " + between.what));
  return box;
}

function timelineOrder(view, redraw) {
  const box = h("div", "fragola-tl-order");
  box.setAttribute("role", "group");
  box.setAttribute("aria-label", "order of the calls");
  for (const [slowest, label] of [[false, "in order"], [true, "slowest first"]]) {
    const b = button(label, "fragola-tl-order-" + (slowest ? "slowest" : "time"));
    b.setAttribute("aria-pressed", String(view.slowest === slowest));
    b.addEventListener("click", () => { view.slowest = slowest; redraw(); });
    box.append(b);
  }
  return box;
}

function timelineRow(b, pc) {
  const kind = b.kind === "tool" ? "tool" : "model";
  const row = h("div", "fragola-tl-grid fragola-tl-row fragola-tl-" + kind);
  row.title = b.title || "";
  const track = h("div", "fragola-tl-track");
  if (Number(b.gap) > 0) {
    const gap = h("div", "fragola-tl-gapbar"); // between calls, before this one
    gap.style.left = pc(Number(b.start) - Number(b.gap));
    gap.style.width = pc(b.gap);
    track.append(gap);
  }
  const bar = h("div", "fragola-tl-bar");
  bar.style.left = "min(" + pc(b.start) + ", 100% - 4px)"; // its 4 px stay on the track
  bar.style.width = pc(b.seconds);
  if (kind === "model" && b.ttft !== null && b.ttft !== undefined && b.seconds > 0) {
    const wait = h("div", "fragola-tl-wait"); // until the first token
    wait.style.width = Math.min(100, (100 * b.ttft) / b.seconds) + "%";
    bar.append(wait);
  }
  track.append(bar);
  row.append(h("span", "fragola-tl-n", String(b.n)), h("bdi", "fragola-tl-label", b.label), track,
    h("span", "fragola-tl-time", b.text), h("span", "fragola-tl-gap", b.gap_text || ""));
  return row;
}

// [the scrolling box of rows, the fold line when some are folded]
function timelineRows(t, bars, view, redraw) {
  const span = Math.max(Number(t.span) || 0, 1e-9);
  const pc = (x) => Math.max(0, Math.min(100, (100 * (Number(x) || 0)) / span)) + "%";
  const list = bars.map((b, i) => ({ ...b, n: b.n || i + 1 }));
  if (view.slowest) list.sort((a, b) => (Number(b.seconds) || 0) - (Number(a.seconds) || 0) || a.n - b.n);
  const shown = view.all ? list : list.slice(0, TIMELINE_SHOWN);
  const box = h("div", "fragola-timeline-bars");
  box.tabIndex = 0; // scrolls by keyboard too
  box.setAttribute("aria-label", "the turn's calls, " + (view.slowest ? "slowest first" : "in order"));
  const head = h("div", "fragola-tl-grid fragola-tl-head");
  const axis = h("span", "fragola-tl-axis");
  axis.append(h("span", "", "0"), h("span", "", t.turn || ""));
  const before = h("span", "fragola-tl-before", "gap");
  before.title = "the time between calls just before this one: no model or tool call ran";
  head.append(h("span", "fragola-tl-n", "#"), h("span", "fragola-tl-call", "call"), axis,
    h("span", "fragola-tl-took", "took"), before);
  box.append(head);
  for (const b of shown) box.append(timelineRow(b, pc));
  const folded = list.slice(shown.length);
  if (!folded.length && list.length <= TIMELINE_SHOWN) return [box];
  const fold = button("", "fragola-tl-fold");
  if (folded.length) {
    const took = folded.reduce((sum, b) => sum + (Number(b.seconds) || 0), 0);
    const gaps = folded.reduce((sum, b) => sum + (Number(b.gap) || 0), 0);
    fold.textContent = "… " + folded.length.toLocaleString("en-US") + " more call" +
      (folded.length === 1 ? "" : "s") + ", " + tlDuration(took) +
      (gaps >= 0.0005 ? " (and " + tlDuration(gaps) + " between calls)" : "") + ": show them";
  } else {
    fold.textContent = "show the first " + TIMELINE_SHOWN + " only";
  }
  fold.setAttribute("aria-expanded", String(!folded.length));
  fold.addEventListener("click", () => { view.all = !view.all; redraw(); });
  return [box, fold];
}

// The agent's tools and its stores, each a folded list.
function listsSection(v) {
  const tools = h("details", "fragola-tools");
  const stores = h("details", "fragola-stores");
  const drawTools = () => {
    const list = v.model.get("tools") || [];
    tools.replaceChildren(h("summary", "", "tools (" + list.length + ")"));
    const ul = h("ul", "");
    for (const t of list) {
      const item = h("li", "");
      item.append(h("bdi", "fragola-tool-name", t.name));
      let flags = t.dynamic ? " (dynamic)" : "";
      if (t.approval) flags += " (needs approval)";
      item.append(document.createTextNode(flags + (t.about ? " — " + t.about : "")));
      ul.append(item);
    }
    tools.append(ul);
    tools.hidden = !list.length;
  };
  const drawStores = () => {
    const list = v.model.get("stores") || [];
    stores.replaceChildren(h("summary", "", "stores (" + list.length + ")"));
    for (const s of list) {
      const item = h("div", "fragola-store");
      item.append(h("bdi", "fragola-store-name", s.name), h("pre", "", s.value));
      stores.append(item);
    }
    stores.hidden = !list.length;
  };
  return { nodes: [tools, stores], drawTools, drawStores };
}

// -- a message's own controls: fork from here, edit and run from here -----------------------
// What each keeps, edits and runs is the kernel's (fromhere.py); a click sends the message's
// index. One editor is open at a time; its text lives here, not in the row's node, so the
// windowed list may redraw the row without losing what was typed. The kernel's answers
// (`source`, `edited`) go through editorUpdate.
function editorSection(v) {
  let editing = null; // {i, k, call, text (null until the kernel sends it), runs, flag, role, busy}
  const rowTool = (label, cls, title, aria) => {
    const b = button(label, "fragola-row-act " + cls, title);
    b.setAttribute("aria-label", aria);
    b.disabled = !v.live() || v.generating();
    return b;
  };
  const redrawRow = (k) => { if (v.store.rows[k]) v.win.changed([v.store.rows[k]]); };
  const openEditor = (row, call) => {
    const before = editing;
    editing = { i: row.i, k: row.k, call: call || "", text: null, busy: false };
    if (before && before.k !== row.k) redrawRow(before.k);
    v.send({ do: "source", i: row.i, call: call || "" });
    redrawRow(row.k);
  };
  const editorEl = () => {
    const e = editing;
    return editorBox(v, e, () => { editing = null; redrawRow(e.k); });
  };
  v.win.decorate = (node, row) => {
    const tools = h("span", "fragola-row-tools");
    const forkHere = rowTool("fork from here", "fragola-fork-here",
      "a fork holding the messages before this one: its Step asks the model again, its message box writes another message here",
      "fork from message " + row.i);
    const editHere = rowTool("✎ edit and run", "fragola-edit-here-open",
      "a fork keeping this message with the text you type, run on from it", "edit message " + row.i + " and run from here");
    forkHere.addEventListener("click", () => v.send({ do: "fork_here", i: row.i }));
    editHere.addEventListener("click", () => openEditor(row, ""));
    tools.append(forkHere, editHere);
    node.querySelector(".fragola-role").after(tools);
    for (const box of node.querySelectorAll(".fragola-call")) {
      const call = (row.calls || []).find((c) => c.id === box.dataset.callId);
      if (!call || call.state === "asked") continue;
      const edit = rowTool("✎ edit result and run", "fragola-edit-result",
        "a fork keeping this call with the result you type, run on from it",
        "edit the result of " + call.name + " and run from here");
      edit.addEventListener("click", () => openEditor(row, call.id));
      box.append(edit);
      if (editing && editing.i === row.i && editing.call === call.id) box.after(editorEl());
    }
    if (editing && editing.i === row.i && !editing.call) node.append(editorEl());
  };
  const custom = (msg) => { // the kernel's answers to this view's editor
    const before = editing;
    editing = editorUpdate(editing, msg);
    if (editing === before) return;
    redrawRow(before.k);
    const area = editing && msg.t === "source" ? v.scroller.querySelector(".fragola-edit-here-text") : null;
    if (area) area.focus();
  };
  const refresh = (on, status) => {
    for (const b of v.scroller.querySelectorAll(".fragola-row-act")) b.disabled = !on || status === "generating";
    for (const b of v.scroller.querySelectorAll(".fragola-edit-here-run")) {
      b.disabled = !on || status === "generating" || Boolean(editing && editing.busy);
    }
  };
  return { custom, refresh };
}

// The open editor `e` under its message (or its call): the text, Run and Cancel.
function editorBox(v, e, close) {
  const box = h("div", "fragola-edit-here");
  if (e.text === null) {
    box.append(h("div", "fragola-edit-here-label", "reading the text…"));
    return box;
  }
  const what = e.call ? "this result" : "this " + e.role + " message";
  box.append(h("div", "fragola-edit-here-label", e.runs
    ? "Edit " + what + ", then Run: a fork keeps the messages up to here with your text and runs on (this agent stays as it is)."
    : "Edit " + what + ": a fork keeps the messages up to here with your text and waits for your next message (this agent stays as it is)."));
  if (e.flag) {
    box.append(h("div", "fragola-flag", "⚠ this text contains direction-control or invisible characters: it may not read as it is stored"));
  }
  const area = h("textarea", "fragola-edit-here-text");
  area.value = e.text;
  area.rows = Math.min(12, Math.max(2, e.text.split("\n").length + 1));
  area.setAttribute("aria-label", "the new text of " + what);
  const run = button(e.runs ? "Run in a fork" : "Fork with this text", "fragola-edit-here-run fragola-primary",
    "fork here with this text" + (e.runs ? " and run on" : ""));
  const cancel = button("Cancel", "fragola-edit-here-cancel", "close the editor; nothing is forked");
  run.disabled = e.busy || !v.live() || v.generating();
  area.addEventListener("input", () => { e.text = area.value; });
  area.addEventListener("keydown", (ev) => {
    ev.stopPropagation();
    if (ev.key === "Escape") { ev.preventDefault(); cancel.click(); }
    else if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) { ev.preventDefault(); run.click(); }
  });
  run.addEventListener("click", () => {
    if (run.disabled) return;
    e.busy = true;
    run.disabled = true;
    v.send({ do: "rerun", i: e.i, call: e.call, text: area.value });
  });
  cancel.addEventListener("click", close);
  const buttons = h("div", "fragola-edit-here-buttons");
  buttons.append(run, cancel);
  box.append(area, buttons);
  return box;
}

function renderView(store, model, el) {
  el.classList.add("fragola-panel");
  dropStaticCopies(el);
  el.setAttribute("data-lm-suppress-shortcuts", "true"); // keys typed here are not notebook commands
  const v = { store, model, el, cleanups: [], send: (message) => model.send(message),
    live: () => store.live && !store.disconnected && !model.get("detached"),
    generating: () => (model.get("head") || {}).status === "generating",
    drawControls: () => {} };
  const head = headerSection(v);
  const strip = stripSection(v);
  const messages = messagesSection(v);
  const cards = cardsSection(v);
  const timeline = timelineSection(v);
  const lists = listsSection(v);
  const editor = editorSection(v);
  const controls = controlsSection(v, [editor.refresh, cards.refresh]);
  v.drawControls = controls.draw;
  el.replaceChildren(...head.nodes, strip.strip, strip.notice, controls.offline, messages.node,
    cards.decisions, cards.node, timeline.node, controls.node, controls.chat, ...lists.nodes,
    controls.detached);

  const view = {
    custom: editor.custom,
    rowsChanged(reset, rows) {
      // the stream first: a message that brings a stored reply clears its stream too, and
      // the rows wait (held) until the streamed text is gone, never both on screen
      messages.drawStream();
      if (reset) v.win.reset();
      else v.win.changed(rows);
      v.win.schedule();
    },
    streamChanged: messages.drawStream,
    liveChanged: controls.draw,
  };
  store.views.add(view);
  v.cleanups.push(() => store.views.delete(view));
  const draws = { head: head.draw, strip: strip.drawStrip, notice: strip.drawNotice,
    cards: cards.drawCards, decisions: cards.drawDecisions, timeline: timeline.draw,
    tools: lists.drawTools, stores: lists.drawStores, detached: controls.draw };
  for (const [name, fn] of Object.entries(draws)) {
    model.on("change:" + name, fn);
    v.cleanups.push(() => model.off("change:" + name, fn));
  }
  // ipywidgets marks a view whose kernel is gone; the controls go off with it
  const marks = new MutationObserver(() => {
    store.disconnected = Boolean(el.closest(".jupyter-widgets-disconnected"));
    controls.draw();
  });
  marks.observe(el, { attributes: true, attributeFilter: ["class"] });
  if (el.parentElement) marks.observe(el.parentElement, { attributes: true, attributeFilter: ["class"] });
  v.cleanups.push(() => marks.disconnect());
  for (const draw of [cards.drawCards, cards.drawDecisions, timeline.draw, head.draw, strip.drawStrip,
    strip.drawNotice, lists.drawTools, lists.drawStores, messages.drawStream]) draw();
  requestAnimationFrame(() => v.win.drawUnlessHeld());
  return () => { for (const fn of v.cleanups) fn(); };
}

// -- the kernel's messages ------------------------------------------------------------------------
// What the kernel sends a panel (custom messages, by `t`), and which pure function takes each:
// `update` for what every view of the panel shares (its rows, the streamed reply, the running
// turn's waterfall), `editorUpdate` for a view's open editor.
// The traits the kernel's outbox paces: a `rows` message may carry their values (`state`).
const PACED = ["head", "strip"];

export const COMMANDS = Object.freeze({
  rows: { by: "update", says: "rows by their `k` (all of them after `reset`, `total` long), with the stream's `stream` and `stopped` when given, and `state`: the paced traits (header, strip) set on the model (panel/view.py, panel/outbox.py)" },
  stream: { by: "update", says: "the streamed reply: its `add` appended or its whole `text`, and `stopped` (panel/view.py)" },
  timeline: { by: "update", says: "a running turn's waterfall: its bars from `from` on and its totals (timeline_feed.py)" },
  source: { by: "editorUpdate", says: "the text of message `i` (or of its call `call`'s result) for the editor, or `failed` (fromhere.py, actions.py)" },
  edited: { by: "editorUpdate", says: "the editor's text forked (`ok`) or refused (actions.py)" },
});

// A panel's shared state before any message: its saved rows (a notebook saved with its widget
// state), no stream, not live (no kernel has spoken).
export function initialState(saved) {
  return { rows: Array.isArray(saved) ? saved.slice() : [], stream: "", stopped: false,
    live: false, asked: new Set(), timeline: null };
}

// (state, message) -> state, touching neither the page nor the model: any message says the
// kernel is there (`live`); `rows` puts rows at their `k` (a `reset` empties the rows, and the
// Markdown asked for, first); `stream` adds to or sets the streamed text; `timeline` keeps the
// bars before `from` and puts the message's after them.
export function update(state, msg) {
  if (!msg || typeof msg !== "object") return state;
  const next = { ...state, live: true };
  if (msg.t === "rows") {
    const rows = msg.reset ? [] : state.rows.slice();
    if (msg.reset) {
      rows.length = msg.total || 0; // the rest of the rows are on the way
      next.asked = new Set();
    }
    for (const row of msg.rows || []) rows[row.k] = row;
    next.rows = rows;
    if ("stream" in msg) { next.stream = msg.stream || ""; next.stopped = Boolean(msg.stopped); }
  } else if (msg.t === "stream") {
    next.stream = "add" in msg ? state.stream + msg.add : msg.text || "";
    next.stopped = Boolean(msg.stopped);
  } else if (msg.t === "timeline") {
    const { t: _t, from, bars, ...rest } = msg;
    const had = (state.timeline || {}).bars;
    const kept = Array.isArray(had) ? had.slice(0, from || 0) : [];
    next.timeline = { ...rest, bars: kept.concat(bars || []) };
  }
  return next;
}

// (editor, message) -> editor: the text the kernel read for the open editor (`source`), its
// fork refused (`edited` not ok: open again, the text kept), or done (closed: null). A message
// for another message or call, or of another kind, leaves the editor as it is.
export function editorUpdate(editing, msg) {
  if (!editing || !msg || (msg.t !== "source" && msg.t !== "edited")) return editing;
  if (msg.i !== editing.i || (msg.call || "") !== editing.call) return editing;
  if (msg.t === "source" && !msg.failed) {
    return { ...editing, text: String(msg.text || ""), runs: Boolean(msg.runs),
      flag: Boolean(msg.flag), role: String(msg.role || "") };
  }
  if (msg.t === "edited" && !msg.ok) return { ...editing, busy: false }; // the notice says why
  return null;
}

// One store per panel model, shared by its views: the state `update` keeps, and what the page
// says (`disconnected`: ipywidgets marked the kernel gone; `waited`: no kernel spoke in 2 s).
function makeStore(saved) {
  return {
    state: initialState(saved), disconnected: false, waited: false, views: new Set(),
    get rows() { return this.state.rows; },
    get stream() { return this.state.stream; },
    get stopped() { return this.state.stopped; },
    get live() { return this.state.live; },
    get asked() { return this.state.asked; },
    ask(ks) { this.state = { ...this.state, asked: new Set([...this.state.asked, ...ks]) }; },
  };
}

export default () => {
  const store = makeStore([]);
  const wake = () => { for (const v of store.views) v.liveChanged(); };
  return {
    initialize({ model }) {
      store.state = initialState(model.get("saved_rows"));
      const onMessage = (msg) => {
        if (!msg || typeof msg !== "object") return;
        const before = store.state;
        const timeline = model.get("timeline") || null;
        const after = update({ ...before, timeline }, msg);
        store.state = after;
        // the rows go into the model's `saved_rows` (never sent to the kernel): the widget
        // state a saved notebook keeps holds every row as it arrives
        if (after.rows !== before.rows) model.set("saved_rows", after.rows);
        if (after.timeline !== timeline) model.set("timeline", after.timeline);
        const by = (COMMANDS[msg.t] || {}).by;
        for (const v of store.views) {
          if (msg.t === "rows") v.rowsChanged(Boolean(msg.reset), msg.rows || []);
          else if (msg.t === "stream") v.streamChanged();
          else if (by === "editorUpdate") v.custom(msg);
        }
        // the paced header and strip ride in the rows message: set as a state update sets them
        if (msg.t === "rows" && msg.state && typeof msg.state === "object") {
          for (const key of PACED) if (key in msg.state) model.set(key, msg.state[key]);
        }
        if (!before.live) wake();
      };
      model.on("msg:custom", onMessage);
      model.send({ do: "hello" });
      const waited = setTimeout(() => { store.waited = true; wake(); }, 2000);
      return () => { clearTimeout(waited); model.off("msg:custom", onMessage); };
    },
    render({ model, el }) {
      return renderView(store, model, el);
    },
  };
};
