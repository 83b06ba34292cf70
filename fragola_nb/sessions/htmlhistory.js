// fragola_nb's export_html viewer, a history (the page's one script is htmlwindow.js,
// htmlmessage.js, this file, then htmlexport.js). Its rows are a window (FxWindow): only those
// near the viewport are in the DOM. A fork's history opens at its fork point: the messages it
// shares with its parent are folded behind one marker ("2,500 messages inherited from root"),
// shown on demand, with a jump back to the fork point. The browser's own find (Ctrl+F) sees
// only the rows drawn, so a history has a find of its own over every message, which Ctrl+F
// focuses (pressed again there, the browser's find opens).
var FxHistory = (function () {
  "use strict";
  var M = FxMessage;
  var FIND_FROM = 50;  // messages: a history this long gets a find bar (the agent's, always)

  // messages: the whole history; options.inherited: how many of its first messages a fork
  // shares with its parent (folded); options.from: the parent's name; options.find: a find
  // bar whatever the length. Returns {node, draw}: draw() draws the rows in view now (the
  // node in the page), else they are drawn at the next frame.
  function history(messages, options) {
    options = options || {};
    var n = messages.length;
    var shared = Math.min(options.inherited || 0, n);
    var folded = shared > 0;
    var root = M.el("div", "fx-history");
    var index = null;
    function calls() { return index || (index = M.callIndex(messages)); }
    var opened = new Set();  // the tool calls opened ("5:0"), kept when a row is drawn again
    var found = { matches: [], set: null, current: -1 };

    // The rows: folded, [marker, own messages]; unfolded, [inherited, marker, own messages].
    function rows() {
      if (!shared) return Math.max(n, 1);
      return (folded ? 1 : shared + 1) + Math.max(n - shared, 1);
    }
    function markerRow() { return folded ? 0 : shared; }
    function rowOf(i) {  // message i's row
      if (!shared || (i < shared && !folded)) return i;
      return markerRow() + 1 + (i - shared);
    }
    function messageAt(k) {  // row k's message, or -1 (the marker, "no messages")
      var mark = shared ? markerRow() : -1;
      if (k === mark) return -1;
      var i = k < mark || mark < 0 ? k : shared + (k - mark - 1);
      return i < n ? i : -1;
    }
    function rowNode(k) {
      if (shared && k === markerRow()) return marker();
      var i = messageAt(k);
      if (i < 0) return M.el("p", "fx-none", shared ? "No messages of its own." : "No messages.");
      var node = M.messageNode(messages[i], i, calls, opened);
      if (found.set && found.set.has(i)) node.classList.add("fx-match");
      if (i === found.matches[found.current]) node.classList.add("fx-hit");
      return node;
    }

    function marker() {
      var box = M.el("div", "fx-fold" + (folded ? "" : " fx-fold-open"));
      var line = M.el("div", "fx-fold-line");
      var range = shared === 1 ? "#0" : "#0 to #" + (shared - 1);
      line.appendChild(M.el("span", "fx-fold-text", (folded ? "" : "\u25b2 ") + M.count(shared) +
        (shared === 1 ? " message" : " messages") + " inherited from " + (options.from || "its parent") +
        " (" + range + ")"));
      var toggle = M.button("fx-fold-toggle", folded ? "show" : "fold",
        folded ? "show the messages this fork shares with its parent" : "fold them again");
      toggle.setAttribute("aria-expanded", String(!folded));
      toggle.addEventListener("click", function () { fold(!folded); });
      line.appendChild(toggle);
      box.appendChild(line);
      var own = n - shared;
      box.appendChild(M.el("div", "fx-fork-point", "\u25bc fork point: " + (own
        ? "this fork's own " + (own === 1 ? "message" : M.count(own) + " messages") + ", from #" + shared
        : "this fork adds no messages")));
      return box;
    }

    var bar = M.el("div", "fx-bar");
    var hosted = M.el("div", "fx-window");
    root.appendChild(bar);
    root.appendChild(hosted);
    var win = new FxWindow(hosted, rows(), rowNode);
    function below() { return bar.offsetHeight + 8; }  // the first px under the sticky bar
    function view() { return window.innerHeight || 800; }

    // The marker stays where it was on the screen; unfolded, low enough that the inherited
    // messages just before the fork point are in view above it.
    function fold(want) {
      var was = win.screenTop(markerRow());
      folded = want;
      win.reset(rows());
      var at = was === null ? below() : was;
      if (!folded) at = Math.min(Math.max(at, view() * 0.45), view() * 0.7);
      win.scrollTo(markerRow(), at);
    }
    if (shared) {
      var jump = M.button("fx-jump", "\u2193 fork point #" + shared,
        "scroll to where this fork's own messages start");
      jump.addEventListener("click", function () {
        win.scrollTo(markerRow(), folded ? below() : view() * 0.4);
      });
      bar.appendChild(jump);
    }

    if (options.find || n >= FIND_FROM) {
      var texts = null;
      var box = M.el("input", "fx-find");
      box.type = "search";
      box.placeholder = "find in these " + M.count(n) + " messages";
      box.setAttribute("aria-label", "find in this history");
      var status = M.el("span", "fx-find-count");
      status.setAttribute("role", "status");
      var back = M.button("fx-find-prev", "\u2191", "previous match (Shift+Enter)");
      var next = M.button("fx-find-next", "\u2193", "next match (Enter)");
      bar.insertBefore(box, bar.firstChild);
      bar.insertBefore(status, box.nextSibling);
      bar.insertBefore(back, status.nextSibling);
      bar.insertBefore(next, back.nextSibling);
      var search = function () {
        var words = box.value.toLowerCase();
        found = { matches: [], set: null, current: -1 };
        if (words.trim()) {
          if (!texts) texts = messages.map(M.searchText);
          for (var i = 0; i < n; i++) if (texts[i].indexOf(words) >= 0) found.matches.push(i);
          found.set = new Set(found.matches);
        }
        var len = found.matches.length;
        status.textContent = !words.trim() ? "" : !len ? "not found"
          : M.count(len) + (len === 1 ? " message" : " messages");
        win.refresh();
      };
      // From the first message in view (as a browser's find goes on from where one is).
      var go = function (step) {
        var len = found.matches.length;
        if (!len) return;
        if (found.current < 0) {
          var first = messageAt(win.find(win.viewTop() + below()));
          if (first < 0) first = shared;
          var from = found.matches.findIndex(function (i) { return i >= first; });
          found.current = step > 0 ? (from < 0 ? 0 : from) : ((from < 0 ? len : from) - 1 + len) % len;
        } else {
          found.current = (found.current + step + len) % len;
        }
        var i = found.matches[found.current];
        if (folded && i < shared) fold(false);
        win.refresh();
        win.scrollTo(rowOf(i), below() + view() * 0.2);
        status.textContent = M.count(found.current + 1) + " of " + M.count(len);
      };
      box.addEventListener("input", search);
      box.addEventListener("keydown", function (e) {
        if (e.key === "Enter") { e.preventDefault(); go(e.shiftKey ? -1 : 1); }
        if (e.key === "Escape") { box.value = ""; search(); }
      });
      back.addEventListener("click", function () { go(-1); });
      next.addEventListener("click", function () { go(1); });
    }
    if (!bar.firstChild) bar.remove();
    win.schedule();
    return { node: root, draw: function () { win.draw(); } };
  }

  // Ctrl+F (Cmd+F) goes to the find of the first history shown; pressed again there, to the
  // browser's own find (which sees only the rows drawn).
  document.addEventListener("keydown", function (e) {
    if (!(e.ctrlKey || e.metaKey) || e.altKey || String(e.key).toLowerCase() !== "f") return;
    var boxes = Array.prototype.filter.call(document.querySelectorAll("input.fx-find"),
      function (box) { return box.getClientRects().length > 0; });
    if (!boxes.length || boxes.indexOf(document.activeElement) >= 0) return;
    e.preventDefault();
    boxes[0].focus();
    boxes[0].select();
  });

  return { history: history };
})();
