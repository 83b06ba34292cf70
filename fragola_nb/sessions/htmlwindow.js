// fragola_nb's export_html viewer, its windowed list (the page's one script is this file,
// htmlmessage.js, htmlhistory.js, then htmlexport.js: htmlexport.py joins them). A history of
// 5,000 messages is browsed with the page's own scroll bar, but only the rows near the
// viewport are in the DOM, between two spacers as tall as the rows above and below them
// (measured once drawn, estimated before), as the notebook panel does with its long
// histories: the page stays a few hundred elements whatever the history's length.
var FxWindow = (function () {
  "use strict";
  var ESTIMATE = 60;  // px, a row's height until it is drawn and measured
  var OVERSCAN = 700;  // px drawn above and below the viewport
  var GAP = 6;  // px below each row (a margin of the CSS, counted in the row's height)

  // host: an element of the page; rows: how many; rowNode(k): the k-th row's element
  function Window(host, rows, rowNode) {
    this.host = host;
    this.top = document.createElement("div");
    this.list = document.createElement("div");
    this.bottom = document.createElement("div");
    this.top.className = this.bottom.className = "fx-spacer";
    this.list.className = "fx-rows";
    host.appendChild(this.top);
    host.appendChild(this.list);
    host.appendChild(this.bottom);
    this.frame = 0;
    this.reset(rows, rowNode);
    var self = this;
    this.onScroll = function () {
      if (!self.host.isConnected) { self.stop(); return; }  // its view was replaced
      self.schedule();
    };
    window.addEventListener("scroll", this.onScroll, { passive: true });
    window.addEventListener("resize", this.onScroll);
    // a tool call opened or closed changes its row's height, a <details> holding this list
    // shows it again: measured again
    document.addEventListener("toggle", this.onScroll, true);
  }

  Window.prototype.stop = function () {
    window.removeEventListener("scroll", this.onScroll);
    window.removeEventListener("resize", this.onScroll);
    document.removeEventListener("toggle", this.onScroll, true);
  };

  // Other rows (a fold opened or closed): nothing measured is kept.
  Window.prototype.reset = function (rows, rowNode) {
    this.rows = rows;
    if (rowNode) this.rowNode = rowNode;
    this.heights = [];
    this.offsets = [0];
    this.dirtyFrom = 0;
    this.drawn = new Map();  // k -> element
    this.list.textContent = "";
    this.top.style.height = "0px";  // as tall as the rows will be, before any is drawn
    this.bottom.style.height = this.offset(rows) + "px";
  };

  // The rows drawn again where they are (what marks them changed: a find's matches).
  Window.prototype.refresh = function () {
    var self = this;
    this.drawn.forEach(function (node, k) {
      var fresh = self.rowNode(k);
      node.replaceWith(fresh);
      self.drawn.set(k, fresh);
    });
    this.schedule();
  };

  Window.prototype.schedule = function () {
    var self = this;
    if (!this.frame) this.frame = requestAnimationFrame(function () { self.frame = 0; self.draw(); });
  };

  Window.prototype.offset = function (i) {  // the top of row i in the host, in px
    var o = this.offsets, n = this.rows;
    if (this.dirtyFrom < n || o.length !== n + 1) {
      for (var j = Math.max(this.dirtyFrom, 0); j < n; j++) o[j + 1] = o[j] + (this.heights[j] || ESTIMATE);
      o.length = n + 1;
      this.dirtyFrom = n;
    }
    return o[i];
  };

  Window.prototype.find = function (y) {  // the first row whose bottom is below y
    var lo = 0, hi = this.rows;
    while (lo < hi) {
      var mid = (lo + hi) >> 1;
      if (this.offset(mid + 1) <= y) lo = mid + 1; else hi = mid;
    }
    return lo;
  };

  // Where the viewport's top is, in the host's px (0 while the host's top is in view).
  Window.prototype.viewTop = function () {
    return -(this.top.getBoundingClientRect().top);
  };

  Window.prototype.draw = function () {
    if (this.frame) { cancelAnimationFrame(this.frame); this.frame = 0; }
    if (!this.host.getClientRects().length) return;  // not shown (a closed <details>): later
    var n = this.rows, y = this.viewTop(), view = window.innerHeight || 800;
    var a = Math.max(0, this.find(y - OVERSCAN));
    var b = Math.min(n, this.find(y + view + OVERSCAN) + 1);
    var self = this;
    this.drawn.forEach(function (node, k) {
      if (k < a || k >= b) { node.remove(); self.drawn.delete(k); }
    });
    var before = null;
    for (var k = b - 1; k >= a; k--) {  // inserted in order, from the end
      var node = this.drawn.get(k);
      if (!node) {
        node = this.rowNode(k);
        this.drawn.set(k, node);
        this.list.insertBefore(node, before);
      }
      before = node;
    }
    // measure what is drawn; keep the first row in view where it was on the screen
    var anchor = y > 0 ? this.find(y) : -1;
    var shift = anchor >= 0 ? y - this.offset(anchor) : 0;
    var moved = false;
    this.drawn.forEach(function (node, k) {
      var height = node.offsetHeight + GAP;
      if (height !== self.heights[k]) {
        self.heights[k] = height;
        self.dirtyFrom = Math.min(self.dirtyFrom, k);
        moved = true;
      }
    });
    this.top.style.height = this.offset(a) + "px";
    this.bottom.style.height = Math.max(0, this.offset(n) - this.offset(b)) + "px";
    if (moved && anchor >= 0) {
      var delta = this.offset(anchor) + shift - this.viewTop();
      if (Math.abs(delta) > 1) window.scrollBy(0, delta);
    }
  };

  // Scroll so that row k's top is `at` px below the viewport's top, and draw it there.
  Window.prototype.scrollTo = function (k, at) {
    for (var round = 0; round < 3; round++) {  // rows drawn there are measured: again
      var delta = this.offset(k) - at - this.viewTop();
      if (round && Math.abs(delta) <= 1) return;
      if (Math.abs(delta) > 1) window.scrollBy(0, delta);
      this.draw();
    }
  };

  // Row k's top on the screen (px from the viewport's top), or null when it is not drawn.
  Window.prototype.screenTop = function (k) {
    var node = this.drawn.get(k);
    return node ? node.getBoundingClientRect().top : null;
  };

  return Window;
})();
