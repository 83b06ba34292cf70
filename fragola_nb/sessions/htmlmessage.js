// fragola_nb's export_html viewer, its messages (the page's one script is htmlwindow.js, this
// file, htmlhistory.js, then htmlexport.js: htmlexport.py joins them). Every text is set with
// textContent; only "h" (assistant Markdown rendered and escaped by fragola_nb.base.render in
// Python) is set as HTML. Nothing is fetched: the page's policy forbids it.
var FxMessage = (function () {
  "use strict";

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }
  function button(cls, text, title) {
    var b = el("button", cls, text);
    b.type = "button";
    if (title) b.title = title;
    return b;
  }
  function count(n) { return n.toLocaleString("en"); }
  function badge(status) { return el("span", "fx-status fx-status-" + String(status).replace(/[^a-z_]/g, ""), status); }

  // Tool call id -> {name, result}, over a whole history, made when a call is first opened.
  function callIndex(messages) {
    var index = {};
    messages.forEach(function (m) {
      (m.c || []).forEach(function (c) { index[c.id] = { name: c.n, result: null }; });
      if (m.r === "tool" && m.id !== undefined) {
        var entry = index[m.id] || (index[m.id] = { name: "tool", result: null });
        entry.result = m.t || "";
      }
    });
    return index;
  }

  // A <details> whose body is drawn the first time it is opened; onToggle(open) is told.
  function lazyDetails(cls, summary, fill, open, onToggle) {
    var details = el("details", cls);
    var head = el("summary");
    summary(head);
    details.appendChild(head);
    var filled = false;
    function draw() { if (!filled && details.open) { filled = true; fill(details); } }
    details.addEventListener("toggle", function () {
      draw();
      if (onToggle) onToggle(details.open);
    });
    if (open) { details.open = true; draw(); }
    return details;
  }

  // A message's number is its index in the history (0 first), as agent.state.messages[i],
  // fork(at=i), edit(i) and every other view of fragola_nb count. `opened` holds the tool
  // calls a person opened, so a row drawn again (scrolled away and back) keeps them open.
  function messageNode(m, index, calls, opened) {
    var role = String(m.r);
    var box = el("div", "fx-msg fx-msg-" + role.replace(/[^a-z]/g, ""));
    box.dataset.index = String(index);
    var head = el("div", "fx-role");
    var number = el("span", "fx-index", "#" + index);
    number.title = "message " + index + ": agent.state.messages[" + index + "]";
    head.appendChild(number);
    head.appendChild(document.createTextNode(" · " + role));
    if (m.ed) {  // agent.edit put a person's text here (the model was sent the text alone)
      head.appendChild(document.createTextNode(" "));
      head.appendChild(el("span", "fx-edited", "edited by hand"));
    }
    box.appendChild(head);
    if (m.h !== undefined) {
      var md = el("div", "fx-md");
      md.innerHTML = m.h;  // escaped by fragola_nb.base.render.markdown_html in Python
      box.appendChild(md);
    }
    if (m.t !== undefined && role !== "tool") box.appendChild(el("div", "fx-text", m.t));
    function kept(key) {
      return function (open) { if (open) opened.add(key); else opened.delete(key); };
    }
    (m.c || []).forEach(function (c, j) {
      var key = index + ":" + j;
      box.appendChild(lazyDetails("fx-call", function (s) {
        s.appendChild(document.createTextNode("calls "));
        s.appendChild(el("b", "fx-call-name", c.n));
      }, function (d) {
        d.appendChild(el("div", "fx-label", "arguments"));
        d.appendChild(el("pre", "fx-args", c.a));
        var entry = calls()[c.id];
        d.appendChild(el("div", "fx-label", "result"));
        d.appendChild(entry && entry.result !== null ? el("pre", "fx-result", entry.result)
          : el("div", "fx-none", "no result in this history"));
      }, opened.has(key), kept(key)));
    });
    if (role === "tool") {
      var key = index + ":r";
      box.appendChild(lazyDetails("fx-tool-result", function (s) {
        var entry = calls()[m.id];
        s.appendChild(document.createTextNode("result of "));
        s.appendChild(el("b", "fx-call-name", entry ? entry.name : "tool"));
      }, function (d) { d.appendChild(el("pre", "fx-result", m.t || "")); },
      opened.has(key), kept(key)));
    }
    if (m.e !== undefined) box.appendChild(el("div", "fx-error", m.e));
    return box;
  }

  // What a find looks in: the message as a person reads it, in lower case.
  var ENTITY = /&(?:#(\d+)|#x([0-9a-f]+)|(lt|gt|amp|quot|apos));/gi;
  var NAMED = { lt: "<", gt: ">", amp: "&", quot: "\"", apos: "'" };
  function searchText(m) {
    var parts = [m.t || "", m.e || ""];
    if (m.h !== undefined) {
      parts.push(m.h.replace(/<[^>]*>/g, " ").replace(ENTITY, function (_, dec, hex, name) {
        if (name) return NAMED[name.toLowerCase()];
        var code = dec ? parseInt(dec, 10) : parseInt(hex, 16);
        return code <= 0x10ffff ? String.fromCodePoint(code) : "";
      }));
    }
    (m.c || []).forEach(function (c) { parts.push(c.n, c.a); });
    return parts.join("\n").toLowerCase();
  }

  return { el: el, button: button, count: count, badge: badge, callIndex: callIndex,
           lazyDetails: lazyDetails, messageNode: messageNode, searchText: searchText };
})();
