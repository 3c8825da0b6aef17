// The labelling widget's front (anywidget ES module): draws the session view from JSON, sends actions back.
const KEYS = {
  "0": { action: "grade", grade: 0 }, "1": { action: "grade", grade: 1 },
  "2": { action: "grade", grade: 2 }, "3": { action: "grade", grade: 3 },
  s: { action: "skip" }, b: { action: "back" }, c: { action: "clear" },
};

function node(tag, className, text) {
  const made = document.createElement(tag);
  if (className) made.className = className;
  if (text !== undefined && text !== null) made.textContent = String(text);
  return made;
}

// UTF-16 code units from the start of `container` to a boundary point (what the Python side converts).
function offsetIn(container, boundary, offset) {
  const range = document.createRange();
  range.selectNodeContents(container);
  range.setEnd(boundary, offset);
  return range.toString().length;
}

function spanList(spans) {
  const list = node("ul", "evalkit-spans");
  for (const span of spans) {
    const item = node("li", "evalkit-span");
    const offsets = node("span", "evalkit-offsets", ` [${span.start}, ${span.end})`);
    item.append(node("q", "evalkit-span-text", span.text), offsets);
    list.append(item);
  }
  return list;
}

function render({ model, el }) {
  const root = node("div", "evalkit-label");
  root.tabIndex = 0;
  el.append(root);
  let note = "";
  let shown = null;
  const send = (message) => model.send(message);
  root.addEventListener("keydown", (event) => {
    const tag = event.target.tagName;
    if (tag === "INPUT" || tag === "TEXTAREA" || event.ctrlKey || event.metaKey || event.altKey) return;
    const action = KEYS[event.key];
    if (!action) return;
    event.preventDefault();
    event.stopPropagation();  // the notebook's own shortcuts (1-3 make a heading cell) never see these keys
    send({ ...action, note: note || null });
  });

  function draw() {
    const view = model.get("view");
    const focused = root.contains(document.activeElement);
    root.replaceChildren();
    const head = node("div", "evalkit-head");
    head.append(node("b", null, `${view.mode === "adjudicate" ? "Adjudicating" : "Labelling"} as ${view.reviewer}`));
    const progress = node("span", "evalkit-progress");
    progress.textContent = view.progress.map((p) => `${p.language}: ${p.done} done / ${p.to_do} to do`).join(" · ");
    head.append(progress);
    root.append(head);
    const task = view.task;
    const key = task ? JSON.stringify([task.query_id, task.chunk_id]) : null;
    if (key !== shown) note = (task && task.recorded && task.recorded.note) || "";  // a pair decided before keeps its note
    shown = key;
    if (!task) {
      root.append(node("p", "evalkit-finished", "Every pair is decided. Press b to go back to the last one."));
    } else {
      root.append(node("div", "evalkit-position", `pair ${view.position.index} of ${view.position.count}`));
      const query = node("div", "evalkit-query");
      query.append(
        node("span", "evalkit-meta", `query ${task.query_id} (${task.language})`),
        node("p", "evalkit-query-text", task.query_text),
      );
      root.append(query);
      const chunk = node("div", "evalkit-chunk");
      chunk.append(
        node("div", "evalkit-title", task.chunk_title),
        node("span", "evalkit-meta", `chunk ${task.chunk_id} (${task.language})`),
      );
      const text = node("div", "evalkit-chunk-text");
      for (const piece of task.segments) {
        text.append(piece.marked ? node("mark", null, piece.text) : document.createTextNode(piece.text));
      }
      text.addEventListener("mouseup", () => {
        const selection = window.getSelection();
        if (!selection || selection.rangeCount === 0 || selection.isCollapsed) return;
        const range = selection.getRangeAt(0);
        if (!text.contains(range.startContainer) || !text.contains(range.endContainer)) return;
        const start = offsetIn(text, range.startContainer, range.startOffset);
        const end = offsetIn(text, range.endContainer, range.endOffset);
        selection.removeAllRanges();
        root.focus({ preventScroll: true });
        send({ action: "select", start, end });
      });
      chunk.append(text);
      root.append(chunk);
      const marked = node("div", "evalkit-marked");
      const hint = task.spans.length
        ? "marked spans (exact characters):"
        : "no span marked: select the supporting text in the chunk";
      marked.append(node("span", "evalkit-meta", hint));
      marked.append(spanList(task.spans));
      root.append(marked);
      if (task.reviews) {
        const reviews = node("div", "evalkit-reviews");
        for (const review of task.reviews) {
          const column = node("div", "evalkit-review");
          const said = review.grade === null ? "did not decide this pair" : `grade ${review.grade}`;
          column.append(node("b", null, `${review.reviewer}: ${said}`), spanList(review.spans));
          reviews.append(column);
        }
        root.append(reviews);
      }
      if (task.recorded) root.append(node("div", "evalkit-recorded", `recorded: grade ${task.recorded.grade}`));
      const buttons = node("div", "evalkit-buttons");
      for (const grade of view.grades) {
        const button = node("button", "evalkit-grade", `${grade.grade} ${grade.name}`);
        button.addEventListener("click", () => send({ action: "grade", grade: grade.grade, note: note || null }));
        buttons.append(button);
      }
      for (const [label, action] of [["skip (s)", "skip"], ["back (b)", "back"], ["clear spans (c)", "clear"]]) {
        const button = node("button", "evalkit-nav", label);
        button.addEventListener("click", () => send({ action }));
        buttons.append(button);
      }
      root.append(buttons);
      const input = node("input", "evalkit-note");
      input.placeholder = "note (optional)";
      input.value = note;
      input.addEventListener("input", () => { note = input.value; });
      root.append(input);
    }
    if (!task && view.progress.length) {
      const button = node("button", "evalkit-nav", "back (b)");
      button.addEventListener("click", () => send({ action: "back" }));
      root.append(button);
    }
    root.append(node("div", "evalkit-message", view.message || ""));
    if (focused) root.focus({ preventScroll: true });
  }

  model.on("change:view", draw);
  draw();
  return () => model.off("change:view", draw);
}

export default { render };
