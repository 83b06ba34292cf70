// The fork tree (tree/view.py's TreeView): one row per agent, drawn with textContent only
// (names come from users and models); a click or Enter sets `selected`, a tick `picked`.
// The kernel sends the tree no custom message: it sets the synced traits listed in COMMANDS
// (at the end), each change taken by the pure `update`; the rows are built from sections.

function span(item, cls, text) {
  const part = document.createElement("span");
  part.className = cls;
  part.textContent = text;
  item.append(part);
  return part;
}

// -- a row's sections -------------------------------------------------------------------------

// compare: two ticked nodes show their diff (the kernel keeps the last two)
function pickBox(node, state, model) {
  const pick = document.createElement("input");
  pick.type = "checkbox";
  pick.className = "fragola-tree-pick";
  pick.checked = state.picked.includes(node.id);
  pick.title = "compare: tick two branches to see their diff";
  pick.setAttribute("aria-label", "compare " + node.name);
  pick.addEventListener("click", (e) => e.stopPropagation());
  pick.addEventListener("change", () => {
    model.set("picked", picked(model.get("picked") || [], node.id, pick.checked));
    model.save_changes();
  });
  return pick;
}

// The name, id, size, where it left its parent, hand edits and status, as text.
function facts(item, node) {
  span(item, "fragola-tree-name", (node.depth ? "\u2514 " : "") + node.name);
  span(item, "fragola-tree-id", node.id);
  span(item, "fragola-tree-count", node.messages + " msg");
  if (node.parent !== null) {
    span(item, "fragola-tree-at", "at message #" + node.at).title = node.at > 0
      ? "holds its parent's messages #0 to #" + (node.at - 1) + ", then went on"
      : "holds none of its parent's messages";
    span(item, "fragola-tree-added", "+" + node.added + " since fork");
  }
  if (node.edited) { // messages agent.edit replaced in this branch, by number
    span(item, "fragola-tree-edited", node.edited).title =
      "messages of this branch a person edited (the model was sent the edited text alone)";
  }
  const status = String(node.status).replace(/[^a-z]/g, "");
  span(item, "fragola-tree-status fragola-tree-status-" + status, status);
}

// the tree keeps the keys it uses: arrows move between nodes, not between notebook cells
function keys(item, choose) {
  item.addEventListener("keydown", (e) => {
    if (e.target !== item) return; // the checkbox's own keys
    const rows = [...item.parentElement.querySelectorAll(".fragola-tree-node")];
    const to = keyTarget(e.key, rows.indexOf(item), rows.length);
    if (to === null) return;
    if (to === "choose") choose(); else if (rows[to]) rows[to].focus();
    e.preventDefault();
    e.stopPropagation();
  });
}

function row(node, state, model) {
  const item = document.createElement("div");
  item.className = "fragola-tree-node" + (node.id === state.selected ? " fragola-tree-selected" : "");
  item.dataset.agentId = node.id;
  item.setAttribute("role", "treeitem");
  item.tabIndex = 0;
  item.style.paddingLeft = (4 + 18 * node.depth) + "px";
  item.append(pickBox(node, state, model));
  facts(item, node);
  const choose = () => { model.set("selected", node.id); model.save_changes(); };
  item.addEventListener("click", choose);
  keys(item, choose);
  return item;
}

// -- pure helpers -----------------------------------------------------------------------------

// The ticked ids after `id`'s box is (un)ticked: the last ticked at the end.
export function picked(ids, id, checked) {
  const now = ids.filter((x) => x !== id);
  return checked ? [...now, id] : now;
}

// What a key does on the row at `at` of `count`: the row to focus, "choose", or null (not ours).
export function keyTarget(key, at, count) {
  if (key === "Enter" || key === " ") return "choose";
  const to = { ArrowDown: at + 1, ArrowUp: at - 1, Home: 0, End: count - 1 }[key];
  return to === undefined ? null : to;
}

// -- the kernel's messages --------------------------------------------------------------------
// What the kernel sets on the tree (synced traits, no custom message), each change taken by
// `update` as `{set: name, value}`.
export const COMMANDS = Object.freeze({
  nodes: { by: "update", says: "`{set: \"nodes\", value: [...]}`: every agent of the tree in depth-first order (tree/view.py's node_of)" },
  selected: { by: "update", says: "`{set: \"selected\", value: id}`: the agent whose panel shows below (ForkTree.select)" },
  picked: { by: "update", says: "`{set: \"picked\", value: [id, ...]}`: the ticked agents, two of them compared (ForkTree.compare)" },
});

export const initialState = () => ({ nodes: [], selected: "", picked: [] });

// (state, message) -> state, touching neither the page nor the model; a message that is not
// one of COMMANDS leaves the state as it is.
export function update(state, msg) {
  if (!msg || !Object.hasOwn(COMMANDS, msg.set)) return state;
  const fallback = msg.set === "selected" ? "" : [];
  return { ...state, [msg.set]: msg.value ?? fallback };
}

function render({ model, el }) {
  el.classList.add("fragola-tree");
  el.setAttribute("role", "tree");
  el.setAttribute("data-lm-suppress-shortcuts", "true"); // its keys are not notebook commands
  let state = initialState();
  for (const name of Object.keys(COMMANDS)) state = update(state, { set: name, value: model.get(name) });
  const draw = () => {
    const active = document.activeElement;
    const focused = el.contains(active) ? active.dataset.agentId : null;
    el.replaceChildren(...state.nodes.map((n) => row(n, state, model)));
    if (focused) {
      const again = [...el.children].find((c) => c.dataset.agentId === focused);
      if (again) again.focus();
    }
  };
  const changed = {};
  for (const name of Object.keys(COMMANDS)) {
    changed[name] = () => { state = update(state, { set: name, value: model.get(name) }); draw(); };
    model.on("change:" + name, changed[name]);
  }
  draw();
  return () => {
    for (const name of Object.keys(COMMANDS)) model.off("change:" + name, changed[name]);
  };
}

export default { render };
