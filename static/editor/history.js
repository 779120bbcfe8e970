/* Undo/redo history of the editor and its debounced change notification. */

const V = new URL(import.meta.url).search; // the entry's ?v=<version>: every module is fetched with it
const { HISTORY_LIMIT, CHANGE_DEBOUNCE_MS } = await import(`./helpers.js${V}`);

/** Methods of Editor (static/editor/index.js mixes them into its prototype). */
export default class HistoryMethods {
  _snapshot() { return JSON.stringify(this.doc); }

  /** Apply `fn` to the document as one undoable step; same `coalesce` key in a row = one step. */
  mutate(label, fn, coalesce) {
    if (this.readOnly) {
      this.message("This is a past version, read-only: go back to the current file to edit.", "warning");
      return undefined;
    }
    const before = this._snapshot();
    const result = fn();
    const after = this._snapshot();
    if (before === after) return result;
    if (!(coalesce && coalesce === this.coalesceKey)) this._pushUndo(before, label);
    this.coalesceKey = coalesce || null;
    this.render();
    this._renderInspector(true); // wiring shown in the inspector may have changed (skipped while typing there)
    this._notifyChange();
    return result;
  }

  _pushUndo(before, label) {
    this.undoStack.push({ snap: before, label });
    if (this.undoStack.length > HISTORY_LIMIT) this.undoStack.shift();
    this.redoStack = [];
    this._updateToolbar();
  }

  _restore(snap) {
    this.doc = JSON.parse(snap);
    for (const id of [...this.selection]) if (!this.node(id)) this.selection.delete(id);
    this.selectedWire = null;
    this.coalesceKey = null;
    this.render();
    this._renderInspector();
    this._notifyChange();
    this._updateToolbar();
  }

  undo() {
    const entry = this.undoStack.pop();
    if (!entry) return false;
    this.redoStack.push({ snap: this._snapshot(), label: entry.label, made: entry.made });
    this._restore(entry.snap);
    // undoing "Make sub-workflow": the host may offer to delete the file it wrote (opts.onUndoSubworkflow(name))
    if (entry.made && this.opts.onUndoSubworkflow) {
      Promise.resolve().then(() => this.opts.onUndoSubworkflow(entry.made))
        .catch((err) => console.warn("metagen editor onUndoSubworkflow:", err));
    }
    return true;
  }

  redo() {
    const entry = this.redoStack.pop();
    if (!entry) return false;
    this.undoStack.push({ snap: this._snapshot(), label: entry.label, made: entry.made });
    this._restore(entry.snap);
    // redoing "Make sub-workflow": the host writes the file again if the undo deleted it (opts.onRedoSubworkflow)
    if (entry.made && this.opts.onRedoSubworkflow) {
      Promise.resolve().then(() => this.opts.onRedoSubworkflow(entry.made))
        .catch((err) => console.warn("metagen editor onRedoSubworkflow:", err));
    }
    return true;
  }

  _notifyChange() {
    clearTimeout(this.changeTimer);
    this.changeTimer = setTimeout(() => {
      this.changeTimer = null;
      if (this.destroyed || !this.opts.onChange) return;
      try { this.opts.onChange(this.getWorkflow()); } catch (err) { console.warn("metagen editor onChange:", err); }
    }, CHANGE_DEBOUNCE_MS);
  }
}
