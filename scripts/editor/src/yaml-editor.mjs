// The instructor's YAML editor: CodeMirror 6 with YAML highlighting and line numbers, mounted over a
// <textarea> that stays the form field. Bundled by scripts/build-editor.sh into
// static/vendor/codemirror/yaml-editor.min.js as the global `CourseEditor`; templates/instructor/edit.html
// calls CourseEditor.mount(textarea). Without JavaScript the textarea is the editor.
import { EditorView, basicSetup } from "codemirror";
import { yaml } from "@codemirror/lang-yaml";
import { Compartment, EditorState, StateEffect, StateField } from "@codemirror/state";
import { Decoration } from "@codemirror/view";
import { indentUnit } from "@codemirror/language";
import { oneDark } from "@codemirror/theme-one-dark";

const dark = window.matchMedia ? window.matchMedia("(prefers-color-scheme: dark)") : null;

// Lines the validator named (file:line in the preview) are marked, so an error is found without counting.
const setErrorLines = StateEffect.define();
const errorLines = StateField.define({
  create: () => Decoration.none,
  update(deco, tr) {
    deco = deco.map(tr.changes);
    for (const e of tr.effects) {
      if (e.is(setErrorLines)) {
        const marks = [];
        for (const n of e.value) {
          if (n >= 1 && n <= tr.state.doc.lines) marks.push(Decoration.line({ class: "cm-error-line" }).range(tr.state.doc.line(n).from));
        }
        deco = Decoration.set(marks, true);
      }
    }
    return deco;
  },
  provide: (f) => EditorView.decorations.from(f),
});

export function mount(textarea, options = {}) {
  const theme = new Compartment();
  const host = document.createElement("div");
  host.className = "cm-host";
  textarea.insertAdjacentElement("afterend", host);
  const view = new EditorView({
    parent: host,
    state: EditorState.create({
      doc: textarea.value,
      extensions: [
        // First, so CodeMirror's <style> elements carry the page's CSP nonce (app/web/middleware/headers.py) from the start.
        options.nonce ? EditorView.cspNonce.of(options.nonce) : [],
        basicSetup,
        yaml(),
        indentUnit.of("  "), // YAML forbids tabs: indentation is two spaces
        // No line wrapping: a long YAML line stays one row that scrolls sideways, so its indentation (which YAML
        // reads) stays visible and End goes to the end of the line, not of a wrapped row of a narrow column.
        EditorState.tabSize.of(2),
        errorLines,
        theme.of(dark && dark.matches ? oneDark : []),
        // tabindex: the text is the scroller's focusable content (a line wider than the box scrolls sideways), which
        // axe's scrollable-region-focusable rule looks for; an editable element is in the tab order either way.
        EditorView.contentAttributes.of({ "aria-label": options.label || "YAML", spellcheck: "false", tabindex: "0" }),
        EditorView.baseTheme({ ".cm-error-line": { backgroundColor: "rgba(220, 40, 40, 0.18)" } }),
        EditorView.updateListener.of((update) => {
          if (!update.docChanged) return;
          textarea.value = update.state.doc.toString();
          // htmx listens for input on the textarea (live validation and preview)
          textarea.dispatchEvent(new Event("input", { bubbles: true }));
        }),
      ],
    }),
  });
  if (dark) {
    dark.addEventListener("change", (ev) => view.dispatch({ effects: theme.reconfigure(ev.matches ? oneDark : []) }));
  }
  textarea.hidden = true;
  const label = textarea.id && document.querySelector(`label[for="${textarea.id}"]`);
  if (label) label.addEventListener("click", () => view.focus());
  return {
    view,
    markErrorLines(lines) {
      view.dispatch({ effects: setErrorLines.of(lines) });
    },
  };
}
