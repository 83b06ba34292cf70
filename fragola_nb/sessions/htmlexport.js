// fragola_nb's export_html viewer: draws the run held in #fx-data (see htmlexport.py), its
// histories with FxHistory (htmlhistory.js), its messages with FxMessage (htmlmessage.js).
// Every text is set with textContent; only "h" (assistant Markdown rendered and escaped by
// fragola_nb.base.render in Python) is set as HTML. Nothing is fetched: the page's policy forbids it.

// A batch's view of an export_html page: its rows, a status filter and a search (htmlexport.js
// calls FxBatch.view for a batch's data). Every text is set with textContent.
var FxBatch = (function () {
  "use strict";
  var CHUNK = 150;  // a batch's rows drawn at a time
  var el = FxMessage.el, badge = FxMessage.badge;
  function historyNode(messages) {  // a nested history: drawn at the next frame
    return FxHistory.history(messages).node;
  }

  function view(root, data) {
    root.appendChild(el("p", "fx-about", data.summary));
    var bar = el("div", "fx-filters");
    var status = el("select", "fx-filter-status");
    status.setAttribute("aria-label", "status");
    var counts = {};
    data.rows.forEach(function (r) { counts[r.status] = (counts[r.status] || 0) + 1; });
    [["", "all (" + data.rows.length + ")"]].concat(Object.keys(counts).map(function (k) {
      return [k, k + " (" + counts[k] + ")"];
    })).forEach(function (pair) {
      var option = el("option", null, pair[1]);
      option.value = pair[0];
      status.appendChild(option);
    });
    var search = el("input", "fx-filter-text");
    search.type = "search";
    search.placeholder = "search inputs, answers, errors";
    search.setAttribute("aria-label", "search");
    var count = el("span", "fx-count");
    bar.appendChild(status);
    bar.appendChild(search);
    bar.appendChild(count);
    root.appendChild(bar);
    var table = el("table", "fx-rows");
    var headRow = el("tr");
    ["#", "status", "input", "answer / error", "tokens", "s"].forEach(function (h) { headRow.appendChild(el("th", null, h)); });
    var thead = el("thead");
    thead.appendChild(headRow);
    table.appendChild(thead);
    var body = el("tbody");
    table.appendChild(body);
    root.appendChild(table);
    var more = el("button", "fx-more");
    more.type = "button";
    root.appendChild(more);
    var kept = [], shown = 0;

    function rowNode(r) {
      var tr = el("tr", "fx-row fx-row-" + r.status.replace(/[^a-z]/g, ""));
      tr.tabIndex = 0;
      tr.appendChild(el("td", null, String(r.index)));
      var cell = el("td");
      cell.appendChild(badge(r.status));
      tr.appendChild(cell);
      tr.appendChild(el("td", "fx-text", r.input));
      tr.appendChild(r.error !== null ? el("td", "fx-error", r.error) : el("td", "fx-text", r.answer === null ? "" : r.answer));
      tr.appendChild(el("td", null, r.tokens === null ? "" : String(r.tokens)));
      tr.appendChild(el("td", null, r.seconds === null ? "" : r.seconds.toFixed(2)));
      var open = null;
      function toggle() {
        if (open) { open.remove(); open = null; tr.classList.remove("fx-open"); return; }
        open = el("tr", "fx-row-detail");
        var td = el("td");
        td.colSpan = 6;
        td.appendChild(r.messages ? historyNode(r.messages)
          : el("p", "fx-none", r.resumed ? "read back from a resume file: no messages" : "no messages kept"));
        open.appendChild(td);
        tr.after(open);
        tr.classList.add("fx-open");
      }
      tr.addEventListener("click", toggle);
      tr.addEventListener("keydown", function (e) { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); toggle(); } });
      return tr;
    }
    function drawMore() {
      var end = Math.min(kept.length, shown + CHUNK);
      var frag = document.createDocumentFragment();
      for (var i = shown; i < end; i++) frag.appendChild(rowNode(kept[i]));
      body.appendChild(frag);
      shown = end;
      more.hidden = shown >= kept.length;
      more.textContent = "show more rows (" + shown + " of " + kept.length + ")";
    }
    function apply() {
      var want = status.value, words = search.value.toLowerCase();
      kept = data.rows.filter(function (r) {
        if (want && r.status !== want) return false;
        if (!words) return true;
        return [r.input, r.answer || "", r.error || ""].join("\n").toLowerCase().indexOf(words) >= 0;
      });
      body.textContent = "";
      shown = 0;
      count.textContent = kept.length + " of " + data.rows.length + " rows";
      drawMore();
    }
    status.addEventListener("change", apply);
    search.addEventListener("input", apply);
    more.addEventListener("click", drawMore);
    apply();
  }


  return { view: view };
})();

(function () {
  "use strict";
  var el = FxMessage.el, lazyDetails = FxMessage.lazyDetails, badge = FxMessage.badge;
  function historyNode(messages) {  // a nested history: drawn at the next frame
    return FxHistory.history(messages).node;
  }
  var data = JSON.parse(document.getElementById("fx-data").textContent);
  var view = document.getElementById("fx-view");

  function facts(tokens, seconds) {
    var parts = [];
    if (tokens !== null && tokens !== undefined) parts.push(tokens.toLocaleString("en") + " tokens");
    if (seconds !== null && seconds !== undefined) parts.push(seconds.toFixed(2) + " s");
    return parts.join(" · ");
  }

  // -- an agent and its fork tree ------------------------------------------------------------
  function agentView(root) {
    var nodes = {}, order = data.nodes;
    order.forEach(function (n) { nodes[n.id] = n; });
    var memo = {};
    function history(n) {  // a fork's history: its parent's first `start` messages, then its own
      if (memo[n.id]) return memo[n.id];
      var parent = n.parent !== null ? nodes[n.parent] : null;
      var full = parent ? history(parent).slice(0, n.start).concat(n.messages) : n.messages;
      return (memo[n.id] = full);
    }
    var layout = el("div", "fx-agent");
    var tree = el("nav", "fx-tree");
    tree.setAttribute("aria-label", "fork tree");
    tree.appendChild(el("div", "fx-label", "fork tree (" + order.length + ")"));
    var detail = el("section", "fx-detail");
    var buttons = {};
    order.forEach(function (n) {
      var b = el("button", "fx-node");
      b.type = "button";
      // indented by its depth, at most 30% of the tree: a deep fork's name keeps its room
      b.style.setProperty("--fx-depth", String(n.depth));
      if (n.depth) b.title = "depth " + n.depth + " (fork of " + nodes[n.parent].name + ")";
      b.appendChild(el("span", "fx-node-name", n.name));
      // its marks wrap together below the name when the name would be squeezed
      var marks = el("span", "fx-node-marks");
      var edits = n.messages.filter(function (m) { return m.ed; }).length;
      if (edits) {  // this branch holds messages a person edited (agent.edit)
        var mark = el("span", "fx-edited fx-node-edited", "\u270e");  // a pencil: narrow
        mark.title = edits + " message(s) of this branch edited by hand";
        mark.setAttribute("aria-label", mark.title);
        marks.appendChild(mark);
      }
      marks.appendChild(el("span", "fx-node-count", String(history(n).length)));
      b.appendChild(marks);
      b.addEventListener("click", function () { select(n.id); });
      buttons[n.id] = b;
      tree.appendChild(b);
    });
    function select(id) {
      var n = nodes[id];
      Object.keys(buttons).forEach(function (k) {
        buttons[k].classList.toggle("fx-selected", k === id);
        buttons[k].setAttribute("aria-pressed", String(k === id));
      });
      detail.textContent = "";
      var head = el("h2", "fx-name", n.name);
      head.appendChild(document.createTextNode(" "));
      head.appendChild(badge(n.status));
      detail.appendChild(head);
      detail.appendChild(el("p", "fx-about", n.about));
      if (n.fork_of) {
        detail.appendChild(el("p", "fx-fork-note", "fork of " + n.fork_of + " at message #" + n.fork_point));
      }
      if (n.instructions) {
        var ins = el("details", "fx-instructions");
        ins.appendChild(el("summary", null, "instructions"));
        ins.appendChild(el("pre", "fx-text", n.instructions));
        detail.appendChild(ins);
      }
      var messages = history(n);
      detail.appendChild(el("div", "fx-label", messages.length.toLocaleString("en") + " messages"));
      // A fork opens at its fork point: what it shares with its parent folded above it.
      var shown = FxHistory.history(messages, {
        inherited: n.parent !== null ? n.start : 0,
        from: n.parent !== null ? nodes[n.parent].name : null, find: true });
      detail.appendChild(shown.node);
      var top = detail.getBoundingClientRect().top;  // a node clicked far down a history
      if (top < 0) window.scrollBy(0, top - 8);
      shown.draw();
    }
    layout.appendChild(tree);
    layout.appendChild(detail);
    root.appendChild(layout);
    select(nodes[data.selected] ? data.selected : order[0].id);
  }

  // -- a comparison: the variants side by side ------------------------------------------------
  function comparisonView(root) {
    root.appendChild(el("p", "fx-asked", "asked: " + data.message));
    if (data.shared.length) {
      root.appendChild(lazyDetails("fx-shared", function (s) {
        s.textContent = "history before the comparison (" + data.shared.length + " messages)";
      }, function (d) { d.appendChild(historyNode(data.shared)); }));
    }
    var grid = el("div", "fx-grid");
    data.variants.forEach(function (v) {
      var col = el("section", "fx-variant");
      var head = el("h2", "fx-name", v.name);
      head.appendChild(document.createTextNode(" "));
      head.appendChild(badge(v.status));
      col.appendChild(head);
      var line = facts(v.tokens, v.seconds);
      if (line) col.appendChild(el("p", "fx-about", line));
      if (v.answer !== null) col.appendChild(el("div", "fx-answer fx-text", v.answer));
      v.calls.forEach(function (c) { col.appendChild(el("div", "fx-call-line", "calls " + c)); });
      if (v.error) col.appendChild(el("div", "fx-error", v.error));
      col.appendChild(lazyDetails("fx-variant-history", function (s) {
        s.textContent = "messages (" + v.messages.length + ")";
      }, function (d) { d.appendChild(historyNode(v.messages)); }));
      grid.appendChild(col);
    });
    root.appendChild(grid);
  }

  var VIEWS = { agent: agentView, comparison: comparisonView,
    batch: function (root) { FxBatch.view(root, data); } };
  view.textContent = "";
  var draw = VIEWS[data.kind];
  if (draw) draw(view); else view.appendChild(el("p", "fx-error", "unknown export kind: " + data.kind));
  document.documentElement.dataset.fxReady = "1";
})();
