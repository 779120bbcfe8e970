/* Keyboard shortcuts of the canvas (never while the user types in a field). */

const V = new URL(import.meta.url).search; // the entry's ?v=<version>: every module is fetched with it
const { shared } = await import(`./helpers.js${V}`);
const { isTyping } = await import(`./dom.js${V}`);

/** Methods of Editor (static/editor/index.js mixes them into its prototype). */
export default class KeyboardMethods {
  _onKeyDown(e) {
    if (isTyping(e.target)) return;
    const mod = e.ctrlKey || e.metaKey;
    const key = e.key;
    if (key === " " && !mod) {
      e.preventDefault();
      if (!e.repeat) { this.spaceDown = true; this.spaceUsed = false; this.viewport.classList.add("mge-space"); }
      return;
    }
    if (mod && (key === "z" || key === "Z") && !e.shiftKey) { e.preventDefault(); this.undo(); return; }
    if (mod && ((key === "z" || key === "Z") && e.shiftKey || key === "y" || key === "Y")) {
      e.preventDefault(); this.redo(); return;
    }
    // copy: the internal clipboard, and (via the copy event that follows) the system one for other tabs
    if (mod && (key === "c" || key === "C")) { this.copySelection(); return; }
    if (mod && (key === "x" || key === "X")) {
      if (this.copySelection()) { e.preventDefault(); this.deleteSelection(); }
      return;
    }
    if (mod && (key === "v" || key === "V")) {
      if (!shared.clipboard) return; // let the paste event bring nodes copied in another tab
      e.preventDefault();
      this.paste(this._pastePoint());
      return;
    }
    if (mod && (key === "a" || key === "A")) {
      e.preventDefault();
      this.selection = new Set(this.doc.nodes.map((n) => n.id));
      this._applySelectionClasses(); this._renderInspector(); this._emitSelect();
      return;
    }
    if (mod && key === "d") { e.preventDefault(); if (this.copySelection()) this.paste(); return; }
    if (mod && (key === "g" || key === "G")) { e.preventDefault(); this.makeSubworkflow(); return; }
    if (mod) return;
    if (key === "Delete" || key === "Backspace") { e.preventDefault(); this.deleteSelection(); return; }
    if (key === "/") { e.preventDefault(); this.openQuickAdd(); return; }
    if (key === "f" || key === "F") {
      e.preventDefault();
      this.fitView(e.shiftKey && this.selection.size ? [...this.selection] : null);
      return;
    }
    if (key === "Escape") {
      this.selection.clear(); this.selectedWire = null;
      this._applySelectionClasses(); this._renderInspector(); this._emitSelect();
    }
  }

  _onKeyUp(e) {
    if (e.key !== " ") return;
    const wasDown = this.spaceDown;
    this.spaceDown = false;
    this.viewport.classList.remove("mge-space");
    if (isTyping(e.target) || !wasDown) return;
    e.preventDefault();
    if (!this.spaceUsed) this.openQuickAdd();
  }
}
