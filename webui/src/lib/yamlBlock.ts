// Reads one top-level block of an experiment YAML as "key: value" pairs, enough to show the
// searcher summary without a YAML library (the master has already validated the config).

export function topLevelBlock(yaml: string, key: string): [string, string][] {
  const lines = yaml.split(/\r?\n/);
  const out: [string, string][] = [];
  let inBlock = false;
  let childIndent = -1;
  for (const raw of lines) {
    const line = raw.replace(/\s+#.*$/, '');
    if (!line.trim()) continue;
    const indent = line.length - line.trimStart().length;
    if (indent === 0) {
      if (inBlock) break;
      const m = line.match(/^([\w.-]+):\s*(.*)$/);
      if (m && m[1] === key) {
        inBlock = true;
        const inline = m[2].trim();
        if (inline.startsWith('{') && inline.endsWith('}')) {
          for (const part of splitFlow(inline.slice(1, -1))) {
            const kv = part.match(/^\s*([\w.-]+)\s*:\s*(.*)$/);
            if (kv) out.push([kv[1], kv[2].trim()]);
          }
          break;
        }
      }
      continue;
    }
    if (!inBlock) continue;
    if (childIndent < 0) childIndent = indent;
    if (indent !== childIndent) continue;
    const m = line.trim().match(/^([\w.-]+):\s*(.*)$/);
    if (m) out.push([m[1], m[2].trim()]);
  }
  return out;
}

function splitFlow(s: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let cur = '';
  for (const ch of s) {
    if (ch === '{' || ch === '[') depth++;
    if (ch === '}' || ch === ']') depth--;
    if (ch === ',' && depth === 0) {
      parts.push(cur);
      cur = '';
    } else cur += ch;
  }
  if (cur.trim()) parts.push(cur);
  return parts;
}
