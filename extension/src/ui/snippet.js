// Search snippets come from the host with matched terms wrapped in `**` (PROTOCOL.md,
// `search`). Split them into plain and marked runs so the popup can show the marks
// as <mark> elements without ever parsing the text as HTML.

/**
 * "a **b** c" -> [{text: "a ", marked: false}, {text: "b", marked: true}, {text: " c", marked: false}].
 * An unpaired `**` stays literal text; empty runs are left out.
 */
export function snippetParts(snippet) {
  const text = String(snippet ?? "");
  const pieces = text.split("**");
  if (pieces.length % 2 === 0) {
    // odd number of markers: the last one has no partner, keep it as text
    const tail = pieces.pop();
    pieces[pieces.length - 1] += `**${tail}`;
  }
  return pieces
    .map((piece, i) => ({ text: piece, marked: i % 2 === 1 }))
    .filter((part) => part.text.length > 0);
}
