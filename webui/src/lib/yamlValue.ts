// Reads one value out of an experiment's YAML (the config as submitted, which the master has
// already validated) by its path, e.g. ['hyperparameters', 'arch'], without a YAML library. The
// subset read is what experiment configs are written in: block mappings and sequences (`- a`,
// `- key: v`), flow mappings and sequences on one line (`{type: categorical, vals: [a, b]}`),
// plain, single- and double-quoted scalars, and `#` comments. Scalars stay text: the caller knows
// their type. Anchors, aliases, tags and multi-line scalars are not read (the value is then
// undefined or its first line); nothing here throws.

export type YamlValue = string | YamlValue[] | { [key: string]: YamlValue };

interface Line {
  indent: number;
  text: string; // without indentation and comment
}

/** The value at `path` in `yaml`, or undefined when some key on the way is absent. A key with
 *  nothing after it (`arch:`) and no nested block reads as ''. */
export function yamlValueAt(yaml: string, path: readonly string[]): YamlValue | undefined {
  const lines = toLines(yaml);
  let value: YamlValue | undefined = lines.length ? parseBlock(lines, 0, lines[0].indent).value : undefined;
  for (const key of path) {
    if (!value || typeof value !== 'object' || Array.isArray(value) || !Object.hasOwn(value, key)) return undefined;
    value = value[key];
  }
  return value;
}

/** A scalar's text, or undefined for a mapping, a sequence or nothing. */
export const scalar = (v: YamlValue | undefined): string | undefined => (typeof v === 'string' ? v : undefined);

function toLines(yaml: string): Line[] {
  const out: Line[] = [];
  for (const raw of yaml.split(/\r?\n/)) {
    const text = stripComment(raw);
    if (!text.trim() || /^(---|\.\.\.)\s*$/.test(text)) continue;
    out.push({ indent: text.length - text.trimStart().length, text: text.trim() });
  }
  return out;
}

/** The line without a `#` comment (one that starts the line or follows a space, outside quotes). */
function stripComment(line: string): string {
  let quote = '';
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (quote) {
      if (c === quote) quote = '';
    } else if (c === '"' || c === "'") quote = c;
    else if (c === '#' && (i === 0 || /\s/.test(line[i - 1]))) return line.slice(0, i).trimEnd();
  }
  return line.trimEnd();
}

const KEY = /^("[^"]*"|'[^']*'|[^\s"'{[\]},:#][^:#]*?)\s*:(?:\s+(.*))?$/;
const unquoteKey = (k: string) => (/^["'].*["']$/.test(k) ? k.slice(1, -1) : k);

/** The block node whose first line is lines[i], at `indent`; `next` is the first line after it. */
function parseBlock(lines: Line[], i: number, indent: number): { value: YamlValue; next: number } {
  if (lines[i].text === '-' || lines[i].text.startsWith('- ')) return parseSequence(lines, i, indent);
  if (!KEY.test(lines[i].text)) return { value: parseFlow(lines[i].text), next: i + 1 };
  const map: Record<string, YamlValue> = {};
  while (i < lines.length && lines[i].indent === indent) {
    const m = lines[i].text.match(KEY);
    if (!m) break;
    const key = unquoteKey(m[1]);
    const rest = (m[2] ?? '').trim();
    i++;
    if (rest) {
      map[key] = parseFlow(rest);
    } else if (i < lines.length && (lines[i].indent > indent || (lines[i].indent === indent && /^-(\s|$)/.test(lines[i].text)))) {
      const child = parseBlock(lines, i, lines[i].indent);
      map[key] = child.value;
      i = child.next;
    } else {
      map[key] = '';
    }
    while (i < lines.length && lines[i].indent > indent) i++; // what could not be read
  }
  return { value: map, next: i };
}

function parseSequence(lines: Line[], i: number, indent: number): { value: YamlValue; next: number } {
  const items: YamlValue[] = [];
  while (i < lines.length && lines[i].indent === indent && /^-(\s|$)/.test(lines[i].text)) {
    const rest = lines[i].text.slice(1).trimStart();
    if (!rest) {
      i++;
      if (i < lines.length && lines[i].indent > indent) {
        const child = parseBlock(lines, i, lines[i].indent);
        items.push(child.value);
        i = child.next;
      } else items.push('');
    } else if (KEY.test(rest) && !/^[[{"']/.test(rest)) {
      // `- key: v` and the lines under it: a mapping whose indent is that of `key`
      const inner = indent + (lines[i].text.length - rest.length);
      const copy = lines.slice();
      copy[i] = { indent: inner, text: rest };
      const child = parseBlock(copy, i, inner);
      items.push(child.value);
      i = child.next;
    } else {
      items.push(parseFlow(rest));
      i++;
    }
  }
  return { value: items, next: i };
}

/** A flow node (`{a: 1, b: [x, y]}`, `[a, b]`) or a scalar. */
export function parseFlow(text: string): YamlValue {
  return flowNode({ s: text.trim(), i: 0 }, '');
}

function flowNode(p: { s: string; i: number }, stops: string): YamlValue {
  skipSpace(p);
  const c = p.s[p.i];
  if (c === '{') {
    p.i++;
    const map: Record<string, YamlValue> = {};
    for (;;) {
      skipSpace(p);
      if (p.i >= p.s.length || p.s[p.i] === '}') break;
      const key = flowScalar(p, ':,}');
      skipSpace(p);
      let value: YamlValue = '';
      if (p.s[p.i] === ':') {
        p.i++;
        value = flowNode(p, ',}');
      }
      if (key) map[key] = value;
      skipSpace(p);
      if (p.s[p.i] === ',') p.i++;
      else break;
    }
    if (p.s[p.i] === '}') p.i++;
    return map;
  }
  if (c === '[') {
    p.i++;
    const items: YamlValue[] = [];
    for (;;) {
      skipSpace(p);
      if (p.i >= p.s.length || p.s[p.i] === ']') break;
      items.push(flowNode(p, ',]'));
      skipSpace(p);
      if (p.s[p.i] === ',') p.i++;
      else break;
    }
    if (p.s[p.i] === ']') p.i++;
    return items;
  }
  return flowScalar(p, stops);
}

function flowScalar(p: { s: string; i: number }, stops: string): string {
  skipSpace(p);
  const q = p.s[p.i];
  if (q === '"' || q === "'") {
    let out = '';
    for (p.i++; p.i < p.s.length; p.i++) {
      const c = p.s[p.i];
      if (q === "'" && c === "'" && p.s[p.i + 1] === "'") {
        out += "'";
        p.i++;
      } else if (q === '"' && c === '\\' && p.i + 1 < p.s.length) {
        const e = p.s[++p.i];
        out += e === 'n' ? '\n' : e === 't' ? '\t' : e;
      } else if (c === q) {
        p.i++;
        break;
      } else out += c;
    }
    return out;
  }
  const start = p.i;
  // In a flow collection a scalar ends at its separators (`:` only when a space follows it).
  while (p.i < p.s.length && !(stops.includes(p.s[p.i]) && (p.s[p.i] !== ':' || /\s|$/.test(p.s[p.i + 1] ?? '')))) p.i++;
  return p.s.slice(start, p.i).trim();
}

function skipSpace(p: { s: string; i: number }) {
  while (p.i < p.s.length && /\s/.test(p.s[p.i])) p.i++;
}
