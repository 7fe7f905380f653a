// npm reference for bench_tokenizer: the same inputs through Hugging Face's
// JS tokenizer engine (@huggingface/tokenizers, installed in tests/js).
//   node bench/bench_tokenizer_ref.mjs TOKENIZER_DIR [--reps N] FILE...
// Prints load time and encode MB/s (medians; process CPU time, as the C
// benchmark, and wall time), and writes
// FILE.ids (JSON array of the ids, add_special_tokens=false) so the C
// benchmark can validate its output against the reference before timing.
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const require = createRequire(path.join(root, 'tests', 'js', 'package.json'));
const mod = await import(require.resolve('@huggingface/tokenizers'));
const Tokenizer = mod.Tokenizer ?? mod.default.Tokenizer;

const args = process.argv.slice(2);
const dir = args.shift();
let reps = 5;
const files = [];
while (args.length) {
  const a = args.shift();
  if (a === '--reps') reps = Number(args.shift());
  else files.push(a);
}
const median = (v) => { const s = [...v].sort((a, b) => a - b); const n = s.length; return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2; };

const loads = [], loadsCpu = [];
let tok;
for (let r = 0; r < reps; r++) {
  const t0 = performance.now(), c0 = process.cpuUsage();
  const tj = JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer.json'), 'utf8'));
  let cfg = {};
  try { cfg = JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer_config.json'), 'utf8')); } catch { /* none */ }
  tok = new Tokenizer(tj, cfg);
  loads.push(performance.now() - t0);
  const c = process.cpuUsage(c0);
  loadsCpu.push((c.user + c.system) / 1e3);
}
console.log(`npm @huggingface/tokenizers: load median ${median(loadsCpu).toFixed(1)} ms CPU (${median(loads).toFixed(1)} ms wall) over ${reps}`);
for (const f of files) {
  const text = fs.readFileSync(f, 'utf8');
  const bytes = Buffer.byteLength(text, 'utf8');
  let ids;
  const rates = [], walls = [];
  for (let r = 0; r < reps; r++) {
    const t0 = performance.now(), c0 = process.cpuUsage();
    ids = tok.encode(text, { add_special_tokens: false }).ids;
    const c = process.cpuUsage(c0);
    rates.push(bytes / 1e6 / ((c.user + c.system) / 1e6));
    walls.push(bytes / 1e6 / ((performance.now() - t0) / 1e3));
  }
  fs.writeFileSync(`${f}.ids`, JSON.stringify(ids));
  console.log(`npm encode ${f}: ${(bytes / 1e6).toFixed(2)} MB, ${ids.length} tokens, median ${median(rates).toFixed(2)} MB/s CPU (${median(walls).toFixed(2)} MB/s wall) over ${reps}`);
}
