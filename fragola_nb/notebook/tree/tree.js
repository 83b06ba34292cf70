// The fork tree (tree/view.py's TreeView): one row per agent, drawn with textContent only
// (names come from users and models); a click or Enter sets `selected`, a tick `picked`.

function row(node, selected, model) {
  const item = document.createElement("div");
  item.className = "fragola-tree-node" + (node.id === selected ? " fragola-tree-selected" : "");
  item.dataset.agentId = node.id;
  item.setAttribute("role", "treeitem");
  item.tabIndex = 0;
  item.style.paddingLeft = (4 + 18 * node.depth) + "px";
  const part = (cls, text) => {
    const span = document.createElement("span");
    span.className = cls;
    span.textContent = text;
    item.append(span);
    return span;
  };
  // compare: two ticked nodes show their diff (the kernel keeps the last two)
  const pick = document.createElement("input");
  pick.type = "checkbox";
  pick.className = "fragola-tree-pick";
  pick.checked = (model.get("picked") || []).includes(node.id);
  pick.title = "compare: tick two branches to see their diff";
  pick.setAttribute("aria-label", "compare " + node.name);
  pick.addEventListener("click", (e) => e.stopPropagation());
  pick.addEventListener("change", () => {
    const now = (model.get("picked") || []).filter((id) => id !== node.id);
    if (pick.checked) now.push(node.id);
    model.set("picked", now);
    model.save_changes();
  });
  item.append(pick);
  part("fragola-tree-name", (node.depth ? "\u2514 " : "") + node.name);
  part("fragola-tree-id", node.id);
  part("fragola-tree-count", node.messages + " msg");
  if (node.parent !== null) {
    part("fragola-tree-at", "at message #" + node.at).title = node.at > 0
      ? "holds its parent's messages #0 to #" + (node.at - 1) + ", then went on"
      : "holds none of its parent's messages";
    part("fragola-tree-added", "+" + node.added + " since fork");
  }
  if (node.edited) { // messages agent.edit replaced in this branch, by number
    part("fragola-tree-edited", node.edited).title =
      "messages of this branch a person edited (the model was sent the edited text alone)";
  }
  const status = String(node.status).replace(/[^a-z]/g, "");
  part("fragola-tree-status fragola-tree-status-" + status, status);
  const choose = () => { model.set("selected", node.id); model.save_changes(); };
  item.addEventListener("click", choose);
  item.addEventListener("keydown", (e) => {
    if (e.target !== item) return; // the checkbox's own keys
    // the tree keeps the keys it uses: arrows move between nodes, not between notebook cells
    const rows = [...item.parentElement.querySelectorAll(".fragola-tree-node")];
    const at = rows.indexOf(item);
    const go = (i) => { if (rows[i]) rows[i].focus(); };
    if (e.key === "Enter" || e.key === " ") choose();
    else if (e.key === "ArrowDown") go(at + 1);
    else if (e.key === "ArrowUp") go(at - 1);
    else if (e.key === "Home") go(0);
    else if (e.key === "End") go(rows.length - 1);
    else return;
    e.preventDefault();
    e.stopPropagation();
  });
  return item;
}

function render({ model, el }) {
  el.classList.add("fragola-tree");
  el.setAttribute("role", "tree");
  el.setAttribute("data-lm-suppress-shortcuts", "true"); // its keys are not notebook commands
  const draw = () => {
    const selected = model.get("selected");
    const active = document.activeElement;
    const focused = el.contains(active) ? active.dataset.agentId : null;
    el.replaceChildren(...(model.get("nodes") || []).map((n) => row(n, selected, model)));
    if (focused) {
      const again = [...el.children].find((c) => c.dataset.agentId === focused);
      if (again) again.focus();
    }
  };
  draw();
  model.on("change:nodes", draw);
  model.on("change:selected", draw);
  model.on("change:picked", draw);
  return () => {
    for (const name of ["nodes", "selected", "picked"]) model.off("change:" + name, draw);
  };
}

export default { render };
