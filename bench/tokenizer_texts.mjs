// Build the two benchmark inputs for the tokenizer benchmarks (C and npm):
//   prose.txt — real English sentences: every "description" string of the
//               JSONSchemaBench schemas in ../shared/datasets (sorted, deduped);
//   code.txt  — real source code: sglc's own src/ and tests/ files.
// Usage: node bench/tokenizer_texts.mjs OUT_DIR [SHARED_DIR]   (deterministic output)
import fs from 'node:fs';
import path from 'node:path';

const [outDir, sharedArg] = process.argv.slice(2);
const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const shared = sharedArg ?? path.join(root, '..', 'shared');
fs.mkdirSync(outDir, { recursive: true });

function walk(dir, pred, acc = []) {
  for (const e of fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) walk(p, pred, acc);
    else if (pred(p)) acc.push(p);
  }
  return acc;
}

const descs = new Set();
function collect(v) {
  if (Array.isArray(v)) v.forEach(collect);
  else if (v && typeof v === 'object') {
    for (const [k, x] of Object.entries(v)) {
      if (k === 'description' && typeof x === 'string' && x.includes(' ') && x.length > 30) descs.add(x.trim());
      else collect(x);
    }
  }
}
for (const f of walk(path.join(shared, 'datasets', 'jsonschemabench'), (p) => p.endsWith('.json'))) {
  try { collect(JSON.parse(fs.readFileSync(f, 'utf8'))); } catch { /* skip unreadable */ }
}
let prose = [...descs].sort().join('\n');
prose = prose.slice(0, 4 << 20);
fs.writeFileSync(path.join(outDir, 'prose.txt'), prose);

const code = walk(path.join(root, 'src'), (p) => /\.[ch]$/.test(p))
  .concat(walk(path.join(root, 'tests'), (p) => /\.(c|sh|mjs)$/.test(p) && !p.includes('node_modules')))
  .map((f) => fs.readFileSync(f, 'utf8')).join('\n');
fs.writeFileSync(path.join(outDir, 'code.txt'), code);
console.log(`prose.txt ${prose.length} chars, code.txt ${code.length} chars`);
