// How the popup tells what was not captured, by the rule that skipped it (no URLs).

/** "3 page(s) by rule: mail.google.com 2, password field 1": pages not captured, by the rule that skipped them. */
export function skippedText(skipped) {
  const counts = Object.entries(skipped ?? {}).filter(([, n]) => Number.isInteger(n) && n > 0);
  const total = counts.reduce((sum, [, n]) => sum + n, 0);
  if (!total) return "0 pages";
  const byRule = counts.sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)).map(([rule, n]) => `${rule} ${n}`);
  return `${total} page(s) by rule: ${byRule.join(", ")}`;
}
